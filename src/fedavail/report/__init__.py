"""Tables and figures from finished runs."""
