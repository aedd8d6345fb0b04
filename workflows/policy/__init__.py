"""Decision policies of the run loop: pure functions over pydantic models, one module each."""
