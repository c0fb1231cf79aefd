"""Reading what publishers send: charsets, almost-XML lists, PDFs, dates, text clean-up; helpers sources call from parse()."""
