"""Every nutchy setting and its default.

A setting is ``NUTCH_`` plus the Nutch property name, upper-cased, with dots as underscores
(``generate.max.count`` → ``NUTCH_GENERATE_MAX_COUNT``), and has Nutch's default unless the docs
(docs/settings.md) say why not. Settings that Nutch does not have are marked "(nutchy only)".
Alphabetical order.
"""

# (nutchy only) Directory of the crawl's local files: the embedded store's file lives here.
NUTCH_CRAWL_DIR = "crawl"

# Rows a scan reads per page. Nutch reads 10000; nutchy reads 1000 because a page of rows with
# content costs ~13 MB per 1000 rows in memory.
NUTCH_GORA_BUFFER_READ_LIMIT = 1000

# Row updates buffered before they are written in one batch.
NUTCH_GORA_BUFFER_WRITE_LIMIT = 1000

# (nutchy only) HBase Thrift1 server of the HBase store.
NUTCH_HBASE_HOST = "localhost"

# (nutchy only) Connections kept open to the Thrift server, shared by a process's threads.
NUTCH_HBASE_POOL_SIZE = 4

# (nutchy only) Port of the HBase Thrift1 server.
NUTCH_HBASE_PORT = 9090

# (nutchy only) Thrift protocol of the server: "binary" or "compact".
NUTCH_HBASE_PROTOCOL = "binary"

# (nutchy only) Socket timeout in milliseconds, for connecting and for every call.
NUTCH_HBASE_TIMEOUT = 10000

# (nutchy only) Thrift transport of the server: "buffered" or "framed".
NUTCH_HBASE_TRANSPORT = "buffered"

# Prefix of the table name: "<crawl id>_webpage", or "webpage" when empty.
NUTCH_STORAGE_CRAWL_ID = ""

# The store: nutchy.store.embedded.EmbeddedStore (one SQLite file, no server) or
# nutchy.store.hbase.HBaseStore (HBase through its Thrift1 server). Nutch's own
# org.apache.gora.hbase.store.HBaseStore is accepted as a name for the latter.
NUTCH_STORAGE_DATA_STORE_CLASS = "nutchy.store.embedded.EmbeddedStore"
