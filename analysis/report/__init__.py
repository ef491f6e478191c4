"""`make report` and the pages every experiment kind writes with it. The modules, by job:

    build     the report of every run on disk (`build_report`), and any page written alike (`write_page`)
    sections  the report's sections, one function each, registered with `section`
    context   what every section reads: the selected runs, the studies, the speed table, the palette
    render    what a section is made of (text, tables, figures), written as HTML and Markdown
    figures   the figure conventions: one colour per variant, one style, one size scale
    tables    tables as files, CSV or Parquet
"""
