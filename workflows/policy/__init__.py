"""The original's decision logic, one pure module per policy (DESIGN "Where new code goes")."""
