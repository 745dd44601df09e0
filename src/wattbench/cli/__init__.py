"""The command line: one module per command, each thin (parse -> config -> library -> render)."""
