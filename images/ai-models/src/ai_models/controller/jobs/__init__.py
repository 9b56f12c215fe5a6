"""Worker Jobs, shared by the rooms that run them: publication Jobs (`controller.models`) and
materialize Jobs (`controller.delivery`) are built from a Helm-rendered pod template by one
builder, labelled with one label rule, limited by one `JobLimits`, counted against their
concurrency setting by one `SlotKeeper`, and read back as one `domain.jobs.JobState`; the tokens
they carry are signed with keys `SigningKeys` reads. What differs per room (names, owners, the
request's variables, volumes) stays in that room's own `jobs` module.
"""
