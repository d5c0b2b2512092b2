"""Nutch's verbs as plain functions on a web table: inject, generate and readdb.

A job takes an open :class:`~nutchy.store.table.WebTable` and plain option values (each job
module has an ``…Options.from_settings`` that reads and validates nutchy's settings), calls the
pure code of :mod:`nutchy.core`, and reads and writes the table in streams and batches. Jobs
open nothing themselves and never start the Twisted reactor: the ``nutchy`` command (and
``scrapy inject``) open the table and call them.
"""
