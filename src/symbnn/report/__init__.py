"""Tables and figures of the report."""
