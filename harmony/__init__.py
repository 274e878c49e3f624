"""The Harmony format (gpt-oss): token-level channel parser and message rendering."""
