"""The catalog-import API: lets a user browse and search what the catalog sources indexed before
asking the module to publish a model, so every answer comes from a local SQLite/FTS5 index kept
equal to the object store (`index`, `index_builder`) rather than from the Hub, and every entry says
whether it would fit the storage budget now (`verdicts` over one `ledger_view` snapshot, also the
storage summary's). `offline` is the same search over a directory store for `ai-models catalog
search`, so the CLI prints exactly what the api serves."""
