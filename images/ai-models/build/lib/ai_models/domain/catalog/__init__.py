"""The model catalog: records of indexed models and the inference-resource facts derived for them."""
