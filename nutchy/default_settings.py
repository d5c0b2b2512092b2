"""Every nutchy setting and its default.

A setting is ``NUTCH_`` plus the Nutch property name, upper-cased, with dots as underscores
(``generate.max.count`` → ``NUTCH_GENERATE_MAX_COUNT``), and has Nutch's default unless the docs
(docs/settings.md) say why not. Settings that Nutch does not have are marked "(nutchy only)".
Alphabetical order.
"""

# (nutchy only) What the address guard lets through although it is not public: IP addresses and
# networks ("10.1.0.0/16", "127.0.0.1") and host names ("intranet.example"; ".example": the domain
# and every host below it). A list, or one string of comma-separated entries.
NUTCH_ADDRESS_GUARD_ALLOW: list[str] = []

# (nutchy only) Whether the fetch refuses to connect to addresses that are not public (loopback,
# private, link-local, multicast, reserved...), checked on the address of every connection
# (docs/fetch.md, "Safety"). Off here because crawls of the local machine (the test suites, the
# README's example) are the defaults' users; on in settings/production.py.
NUTCH_ADDRESS_GUARD_ENABLED = False

# Whether the index's anchor field keeps an anchor text once, whatever its case (Nutch's
# anchorIndexingFilter.deduplicate).
NUTCH_ANCHORINDEXINGFILTER_DEDUPLICATE = False

# (nutchy only) Directory of the crawl's local files: the embedded store's file lives here.
NUTCH_CRAWL_DIR = "crawl"

# How long (ms) a generate mark locks a row: after that the batch counts as abandoned and its rows
# can be generated again (Nutch 1.x's rule; Nutch 2.x never reads it). -1 keeps marks forever, as
# Nutch 2.x does in effect.
NUTCH_CRAWL_GEN_DELAY = 604800000

# (nutchy only) Whether nutchy crawl runs its fetch in its own process (a thread runs Scrapy)
# rather than in a child, when one long-lived fetcher serves every round (-numFetchers 1, no
# per-round limit): one interpreter instead of two, for the crawl's memory (docs/crawl.md).
NUTCH_CRAWL_FETCH_IN_PROCESS = True

# (nutchy only) Whether nutchy crawl appends each round's statistics to the crawl's history
# (history.jsonl in NUTCH_CRAWL_DIR; one scan of the table per round), which nutchy plot draws.
NUTCH_CRAWL_HISTORY = True

# (nutchy only) nutchy crawl reads what updatedb needs of a batch while the batch is fetched, and
# keeps it for the pages that answer 304: at most this many outlinks (about 500 bytes each);
# 0 turns it off. It also caps what the parse process keeps of the pages it parses, for
# the updatedb of nutchy crawl's own process or of scrapy crawl nutch.
NUTCH_CRAWL_READ_AHEAD_MAX_OUTLINKS = 500000

# Fetch interval (s) of injected URLs that give none, and of new rows: 30 days.
NUTCH_DB_FETCH_INTERVAL_DEFAULT = 2592000

# Longest fetch interval (s): a page due further ahead than this is treated as due now, its
# interval cut to 90% of it. 90 days.
NUTCH_DB_FETCH_INTERVAL_MAX = 7776000

# Failed fetches (RETRY) after which updatedb marks a page GONE.
NUTCH_DB_FETCH_RETRY_MAX = 3

# Adaptive schedule: share by which the interval of a modified page shrinks.
NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_DEC_RATE = 0.2

# Adaptive schedule: share by which the interval of an unmodified page grows.
NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_INC_RATE = 0.4

# Adaptive schedule: longest interval (s), 365 days.
NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_MAX_INTERVAL = 31536000

# Adaptive schedule: shortest interval (s).
NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_MIN_INTERVAL = 60

# Adaptive schedule: whether the next fetch moves towards the page's last change.
NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_SYNC_DELTA = True

# Adaptive schedule: share of the time since the last change the next fetch moves back.
NUTCH_DB_FETCH_SCHEDULE_ADAPTIVE_SYNC_DELTA_RATE = 0.3

# The fetch schedule updatedb applies: DefaultFetchSchedule or AdaptiveFetchSchedule.
NUTCH_DB_FETCH_SCHEDULE_CLASS = "nutchy.core.schedule.DefaultFetchSchedule"

# Whether redirects (at fetch) and outlinks (at parse) to another host are ignored.
NUTCH_DB_IGNORE_EXTERNAL_LINKS = False

# Whether outlinks to the page's own host are dropped at parse (Nutch 1.x's meaning; Nutch 2.x
# defines db.ignore.internal.links as true but never reads it).
NUTCH_DB_IGNORE_INTERNAL_LINKS = False

# Longest anchor text kept for an outlink, in characters.
NUTCH_DB_MAX_ANCHOR_LENGTH = 100

# Most outlinks kept per parsed page (< 0: all). nutchy keeps all (Nutch: 100): an index page of a
# documentation site links to thousands, and the content limit bounds how many a page can hold.
NUTCH_DB_MAX_OUTLINKS_PER_PAGE = -1

# Score of injected URLs that give none (also their OPIC cash).
NUTCH_DB_SCORE_INJECTED = 1.0

# OPIC: factor of the cash share an outlink to another host receives.
NUTCH_DB_SCORE_LINK_EXTERNAL = 1.0

# OPIC: factor of the cash share an outlink to the same host receives.
NUTCH_DB_SCORE_LINK_INTERNAL = 1.0

# How parse computes a page's signature: MD5Signature or TextProfileSignature.
NUTCH_DB_SIGNATURE_CLASS = "nutchy.core.signature.MD5Signature"

# TextProfileSignature: tokens must be longer than this many characters.
NUTCH_DB_SIGNATURE_TEXT_PROFILE_MIN_TOKEN_LEN = 2

# TextProfileSignature: quantization of token counts, relative to the highest count.
NUTCH_DB_SIGNATURE_TEXT_PROFILE_QUANT_RATE = 0.01

# Whether updatedb adds rows for new outlink targets.
NUTCH_DB_UPDATE_ADDITIONS_ALLOWED = True

# Most inlinks (best scored first) updatedb records per page and round.
NUTCH_DB_UPDATE_MAX_INLINKS = 10000

# nutchy dedup: which of the pages with one signature is kept, the first criterion deciding
# first: score (highest), urlLength (shortest), fetchTime (latest), httpsOverHttp. Nutch 1.x's
# default is score,fetchTime,urlLength (docs/index.md says why nutchy's differs).
NUTCH_DEDUPLICATION_COMPARE_ORDER = "score,urlLength,fetchTime"

# nutchy dedup: pages are duplicates only within one host, one domain, or anywhere (none).
NUTCH_DEDUPLICATION_GROUP_MODE = "none"

# (nutchy only) nutchy dedup: pages held in memory (about 300 bytes each) before a sorted run is
# spilled to a temporary file.
NUTCH_DEDUPLICATION_SORT_ROWS = 200000

# The Elasticsearch/OpenSearch index writers (docs/index.md): an API key (its "encoded" value, or
# id:key) to send as Authorization: ApiKey; empty: none.
NUTCH_ELASTIC_API_KEY = ""

# The Elasticsearch/OpenSearch index writers: HTTP Basic password (with NUTCH_ELASTIC_AUTH_USERNAME).
NUTCH_ELASTIC_AUTH_PASSWORD = ""

# The Elasticsearch/OpenSearch index writers: HTTP Basic user name; empty: no Basic auth.
NUTCH_ELASTIC_AUTH_USERNAME = ""

# The Elasticsearch/OpenSearch index writers: a bearer token (a service token); empty: none.
NUTCH_ELASTIC_BEARER_TOKEN = ""

# The Elasticsearch/OpenSearch index writers: first pause (ms) before a failed request or bulk
# item is sent again, doubled each time (at most 60 s).
NUTCH_ELASTIC_EXPONENTIAL_BACKOFF_MILLIS = 100

# The Elasticsearch/OpenSearch index writers: how many times a failed request or bulk item is
# sent again before the writer gives up.
NUTCH_ELASTIC_EXPONENTIAL_BACKOFF_RETRIES = 10

# The Elasticsearch/OpenSearch index writers: the index.
NUTCH_ELASTIC_INDEX = "nutch"

# The Elasticsearch/OpenSearch index writers: actions in one bulk request at most.
NUTCH_ELASTIC_MAX_BULK_DOCS = 250

# The Elasticsearch/OpenSearch index writers: bytes of one bulk request's body at most (a larger
# document goes alone).
NUTCH_ELASTIC_MAX_BULK_SIZE = 2500500

# The Elasticsearch/OpenSearch index writers: seconds to connect, and to wait for an answer.
NUTCH_ELASTIC_TIMEOUT = 30.0

# The Elasticsearch/OpenSearch index writers: check the server's TLS certificate (True), not
# (False), or against the CA bundle at this path.
NUTCH_ELASTIC_TLS_VERIFY = True

# The Elasticsearch/OpenSearch index writers: the server's URL.
NUTCH_ELASTIC_URL = "http://localhost:9200"

# (nutchy only) Seconds between two writes of fetch outcomes at most, however few are waiting.
NUTCH_FETCHER_FLUSH_INTERVAL = 2.0

# (nutchy only) The threshold of the young generation of Python's cyclic garbage collector while a
# fetch runs (gc.set_threshold; the interpreter's is 700), put back when it ends: a fetch makes
# thousands of short-lived objects a page, and collecting every 700 of them cost 0.7-0.9 s of CPU
# in a fetch of 2,000 pages. 0 leaves the interpreter's.
NUTCH_FETCHER_GC_THRESHOLD = 10000

# (nutchy only) Seconds between two progress lines of the fetch in its log, when its standard error
# is not a terminal (on a terminal it draws a bar).
NUTCH_FETCHER_PROGRESS_LOG_INTERVAL = 10.0

# (nutchy only) Fetch outcomes buffered before they are written in one batch. A fetch killed at
# any moment loses at most twice this many outcomes, plus the fetches in flight.
NUTCH_FETCHER_FLUSH_SIZE = 100

# Whether a fetch skips the rows of its batch that already have a fetch mark (-a resume=true).
NUTCH_FETCHER_JOB_RESUME = False

# Longest robots.txt Crawl-delay (s) honoured: the pages of a host asking for more are recorded as
# ROBOTS_DENIED. -1: honour any delay.
NUTCH_FETCHER_MAX_CRAWL_DELAY = 30

# A fetch queue whose requests failed with an exception (no answer, a timeout, 5xx) this many
# times in one fetch is left for a later fetch (its rows stay generated, unfetched); generate
# also leaves out hosts with this many consecutive errors in the host database (docs/hostdb.md).
# -1: no limit.
NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE = -1

# Shortest delay (s) between requests to a queue that a robots.txt Crawl-delay may ask for; -1
# means NUTCH_FETCHER_SERVER_DELAY (Nutch 1.x, NUTCH-2775; Nutch 2.x takes any Crawl-delay).
NUTCH_FETCHER_MIN_CRAWL_DELAY = -1.0

# Whether pages are parsed during the fetch, by the parse item pipeline (Nutch: False).
NUTCH_FETCHER_PARSE = True

# (nutchy only) Whether a crawl indexes each batch it updated into NUTCH_INDEX_WRITERS: scrapy
# crawl nutch by the index item pipeline, nutchy crawl after each round's updatedb (see
# docs/index.md). Without it, run nutchy index ID after updatedb.
NUTCH_FETCHER_INDEX = False

# (nutchy only) Whether that parse runs in a process of its own, fed the pages through a pipe, on
# another core (True), or in a thread of the fetch's process (False). See docs/parse.md.
NUTCH_FETCHER_PARSE_PROCESS = True

# (nutchy only) Whether a crawl runs updatedb on each batch it fetched whole, by the updatedb
# item pipeline (see docs/updatedb.md). Without it, run nutchy updatedb ID after the fetch.
NUTCH_FETCHER_UPDATEDB = True

# In-memory fetch entries per fetch slot: CONCURRENT_REQUESTS times this many rows in all, and
# NUTCH_FETCHER_THREADS_PER_QUEUE times this many per queue.
NUTCH_FETCHER_QUEUE_DEPTH_MULTIPLIER = 50

# What a fetch queue (and its politeness) groups URLs by: "byHost", "byDomain" or "byIP".
NUTCH_FETCHER_QUEUE_MODE = "byHost"

# Delay (s) between the end of one request to a queue and the start of the next, when a queue
# fetches one page at a time.
NUTCH_FETCHER_SERVER_DELAY = 5.0

# Delay (s) between requests to a queue that fetches several pages at a time.
NUTCH_FETCHER_SERVER_MIN_DELAY = 0.0

# Whether fetched content is stored; when not, an empty content is written in its place.
NUTCH_FETCHER_STORE_CONTENT = True

# Requests in flight per queue at most.
NUTCH_FETCHER_THREADS_PER_QUEUE = 1

# Minutes after which a fetch stops taking new URLs and ends, leaving the rest of the batch for a
# resumed fetch (-a timelimit=MIN); -1: no limit.
NUTCH_FETCHER_TIMELIMIT_MINS = -1

# (nutchy only) Where the fetch takes the rows of its batch: "local" (read from the web table by
# this process) or "redis" (queues leased from a batch in Redis, shared by many workers; the
# connection is scrapy-redis's REDIS_URL and REDIS_PARAMS).
NUTCH_FRONTIER = "local"

# (nutchy only) Seconds a worker's lease on a queue of the Redis frontier lives without being
# renewed: a worker that dies loses its queues to the others this long after its last renewal.
NUTCH_FRONTIER_LEASE_TIMEOUT = 30.0

# (nutchy only) Seconds a worker of the Redis frontier fetches from one queue at most before
# giving it back (with its rows left and its next allowed time), so that no worker keeps a queue
# from the others.
NUTCH_FRONTIER_QUEUE_HOLD = 60.0

# What generate counts URLs per for NUTCH_GENERATE_MAX_COUNT: "host" or "domain".
NUTCH_GENERATE_COUNT_MODE = "host"

# Whether generate applies the URL filter (-noFilter turns it off for one run).
NUTCH_GENERATE_FILTER = True

# (nutchy only) How long (s) after its last fetch generate leaves out a host the host database
# shows failing (NUTCH_FETCHER_MAX_EXCEPTIONS_PER_QUEUE, NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE).
NUTCH_GENERATE_HOSTDB_DELAY = 86400.0

# (nutchy only) Generate leaves out a host whose fetched rows failed more often than this (0 to
# 1) in the host database, for NUTCH_GENERATE_HOSTDB_DELAY; -1: off.
NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE = -1.0

# (nutchy only) The fetched rows a host needs before NUTCH_GENERATE_HOSTDB_MAX_ERROR_RATE applies.
NUTCH_GENERATE_HOSTDB_MIN_FETCHED = 10

# At most this many URLs per host or domain in one batch; -1 (or 0) for no limit.
NUTCH_GENERATE_MAX_COUNT = -1

# Generate skips URLs whose link distance from a seed (the "dist" marker) is larger; -1: no limit.
NUTCH_GENERATE_MAX_DISTANCE = -1

# Generate skips URLs whose sort value (OPIC: score squared) is below this.
NUTCH_GENERATE_MIN_SCORE = 0.0

# Whether generate skips rows whose URL is not normalized (-noNorm turns it off for one run).
NUTCH_GENERATE_NORMALISE = True

# Rows a scan reads per page. Nutch reads 10000; nutchy reads 1000 because a page of rows with
# content costs ~13 MB per 1000 rows in memory.
NUTCH_GORA_BUFFER_READ_LIMIT = 1000

# Row updates buffered before they are written in one batch.
NUTCH_GORA_BUFFER_WRITE_LIMIT = 1000

# (nutchy only) Bytes of cells the HBase store sends in one mutateRows call at most (a row larger
# than that goes alone): well under the 2 MB frames a framed Thrift server accepts by default.
NUTCH_HBASE_BATCH_BYTES = 1048576

# (nutchy only) HBase Thrift1 server of the HBase store.
NUTCH_HBASE_HOST = "localhost"

# (nutchy only) Milliseconds a lease of the HBase store (a bucket of rows updatedb writes, the
# table's generate) lasts without renewal; its holder renews it every third of that, and one not
# renewed that long (its holder died) is taken over. At least 3 x NUTCH_HBASE_TIMEOUT.
NUTCH_HBASE_LOCK_LEASE = 60000

# (nutchy only) Milliseconds the HBase store waits for a lease a live writer holds before it fails
# naming the holder; 0: as long as that writer renews it.
NUTCH_HBASE_LOCK_TIMEOUT = 0

# (nutchy only) Connections kept open to the Thrift server, shared by a process's threads.
NUTCH_HBASE_POOL_SIZE = 4

# (nutchy only) Port of the HBase Thrift1 server.
NUTCH_HBASE_PORT = 9090

# (nutchy only) Thrift protocol of the server: "binary" or "compact".
NUTCH_HBASE_PROTOCOL = "binary"

# (nutchy only) Rows the HBase store asks for in one scanner call (HBase's
# hbase.client.scanner.caching; Gora's HBase store asks for 1000).
NUTCH_HBASE_SCANNER_CACHING = 1000

# (nutchy only) Milliseconds one scanner call of the HBase store may take (HBase's
# hbase.client.scanner.timeout.period); a filtered scan that takes longer goes on in shorter
# stretches of the table (docs/storage.md).
NUTCH_HBASE_SCANNER_TIMEOUT = 60000

# (nutchy only) Socket timeout in milliseconds, for connecting and for every call.
NUTCH_HBASE_TIMEOUT = 10000

# (nutchy only) Thrift transport of the server: "buffered" or "framed".
NUTCH_HBASE_TRANSPORT = "buffered"

# The User-Agent sent, as Nutch builds it: NAME/VERSION (DESCRIPTION; +URL; EMAIL), the empty parts
# left out; robots.txt groups are matched on NAME. A project's own USER_AGENT replaces it. The fetch
# warns at start while neither URL nor EMAIL says how to reach whoever runs the crawl. VERSION
# empty: nutchy's version.
NUTCH_HTTP_AGENT_NAME = "nutchy"
NUTCH_HTTP_AGENT_VERSION = ""
NUTCH_HTTP_AGENT_DESCRIPTION = ""
NUTCH_HTTP_AGENT_URL = ""
NUTCH_HTTP_AGENT_EMAIL = ""

# (nutchy only) Whether the fetch warns at start when the User-Agent names no contact (above);
# nutchy crawl warns once itself and turns it off in its fetch children.
NUTCH_HTTP_AGENT_CONTACT_WARNING = True

# Bytes of content kept of each response; the rest is not downloaded and the content is marked
# truncated. -1: no limit (Scrapy's DOWNLOAD_MAXSIZE still applies). 1 MiB, as Nutch 1.x has now
# (Nutch 2.x: 64 KiB, which cuts long documentation pages).
NUTCH_HTTP_CONTENT_LIMIT = 1048576

# Redirects followed within a fetch (Nutch 1.x); 0 records each redirect on its row and leaves
# the target to a later round, as Nutch 2.x always does.
NUTCH_HTTP_REDIRECT_MAX = 0

# Whether a robots.txt answering 403 allows everything (True) or forbids everything.
NUTCH_HTTP_ROBOTS_403_ALLOW = True

# Whether a robots.txt answering 5xx or 429 defers the host's pages instead of allowing them
# (Nutch 1.x, NUTCH-2573).
NUTCH_HTTP_ROBOTS_503_DEFER_VISITS = True

# How long (ms) a host is deferred when its robots.txt answers 5xx or 429.
NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_DELAY = 300000

# Deferrals of one host after which its remaining pages are left for a later fetch.
NUTCH_HTTP_ROBOTS_503_DEFER_VISITS_RETRIES = 3

# (nutchy only) Bytes of a robots.txt read, raw and decoded alike (Google reads 500 KiB); the
# rest is ignored, as if the file ended there. -1: no limit.
NUTCH_HTTP_ROBOTS_MAX_SIZE = 512000
# (nutchy only) Seconds a robots.txt answer is used after it was fetched, by this process and by
# every other process of the crawl (the next rounds', other fetchers', other workers'), which find
# it beside the web table (docs/fetch.md); at most 86400 (24 hours, RFC 9309). 0: each process
# fetches robots.txt once per host and keeps the answer for itself.
NUTCH_HTTP_ROBOTS_EXPIRY = 86400

# Whether the response time (ms) is stored in mtdt:_rs_.
NUTCH_HTTP_STORE_RESPONSETIME = True

# Timeout (ms) of one request.
NUTCH_HTTP_TIMEOUT = 10000

# Row metadata (mtdt) keys that become index fields of the same name (Nutch's index.metadata).
NUTCH_INDEX_METADATA: list[str] = []

# The index writers, as class path -> order (None turns one off); every document goes to each
# (docs/index.md). The default is the embedded full-text index (the extra nutchy[index]).
NUTCH_INDEX_WRITERS = {"nutchy.index.embedded.EmbeddedIndexWriter": 100}

# (nutchy only) The CSV index writer's file, under NUTCH_CRAWL_DIR when relative.
NUTCH_INDEXER_CSV_PATH = "index.csv"

# Whether pages with a noindex robots meta tag (or X-Robots-Tag) are kept out of the index and
# deleted from it (Nutch: False, which indexes them with an empty title and text).
NUTCH_INDEXER_DELETE_ROBOTS_NOINDEX = True

# (nutchy only) The embedded index's folder, under NUTCH_CRAWL_DIR when relative.
NUTCH_INDEXER_EMBEDDED_PATH = "index"

# (nutchy only) The JSON lines index writer's file, under NUTCH_CRAWL_DIR when relative.
NUTCH_INDEXER_JSONL_PATH = "index.jsonl"

# Characters of a page's text indexed at most (-1: all; Nutch: -1). A longer text is cut.
NUTCH_INDEXER_MAX_CONTENT_LENGTH = 100000

# Characters of a page's title indexed at most (-1: all).
NUTCH_INDEXER_MAX_TITLE_LENGTH = 100

# A document's boost is the page's score to this power (Nutch's indexerScore).
NUTCH_INDEXER_SCORE_POWER = 0.5

# The indexing filters, as class path -> order (None turns one off): each builds part of a
# page's document, or keeps the page out of the index (docs/index.md).
NUTCH_INDEXING_FILTERS = {
    "nutchy.index.filters.RobotsMetaIndexingFilter": 100,
    "nutchy.index.filters.BasicIndexingFilter": 200,
    "nutchy.index.filters.AnchorIndexingFilter": 300,
    "nutchy.index.filters.MetadataIndexingFilter": 400,
}

# (nutchy only) Whether the items of parsed pages (nutchy.items) carry the page's content: text,
# or Base64 for a content type that is not text.
NUTCH_ITEM_CONTENT = False

# (nutchy only) Whether the items of parsed pages carry title, text and outlinks: True, False, or
# None to decide by what reads them (feed exports, NUTCH_ITEM_CONTENT, or an item pipeline of the
# project after nutchy's parse pipeline; nutchy._pageparse.item_parse_fields).
NUTCH_ITEM_PARSE_FIELDS = None

# (nutchy only) Address the Prometheus metrics are served on (NUTCH_METRICS_PORT).
NUTCH_METRICS_ADDRESS = "127.0.0.1"

# (nutchy only) Seconds between two snapshots of the fetch's metrics.
NUTCH_METRICS_INTERVAL = 1.0

# (nutchy only) Port of the Prometheus metrics of the fetch and of nutchy crawl (nutchy[metrics]);
# -1: off, 0: any free port.
NUTCH_METRICS_PORT = -1

# Longest outlink URL kept, in characters.
NUTCH_PARSER_HTML_OUTLINKS_MAX_TARGET_LENGTH = 3000

# Whether parse skips pages whose content was truncated at fetch. nutchy parses them up to the cut,
# as browsers do with a page that arrives in part (Nutch: True), so their links are followed.
NUTCH_PARSER_SKIP_TRUNCATED = False

# Seconds one page may take to parse (-1: no limit); then the parse fails.
NUTCH_PARSER_TIMEOUT = 30

# (nutchy only) Seconds allowed to resolve one host when partitioning by IP; a host that does not
# resolve in time is partitioned by its name.
NUTCH_PARTITION_RESOLVE_TIMEOUT = 5.0

# What generate's partitions (-numFetchers) group URLs by: "byHost", "byDomain" or "byIP".
NUTCH_PARTITION_URL_MODE = "byHost"

# Seed mixed into the partition hash, as in Nutch's URLPartitioner.
NUTCH_PARTITION_URL_SEED = 0

# (nutchy only) How deep `nutchy sitemap` follows sitemap indexes: 1 reads the sitemaps an index
# lists, 2 also indexes listed by an index (which the protocol does not allow, but sites do).
NUTCH_SITEMAP_INDEX_DEPTH_MAX = 2

# (nutchy only) Largest sitemap read, in bytes, downloaded and unzipped alike (the protocol's
# limit is 50 MB uncompressed).
NUTCH_SITEMAP_SIZE_MAX = 52428800

# (nutchy only) Whether `nutchy sitemap -robots` tries /sitemap.xml on a host whose robots.txt
# names no sitemap, as Nutch 1.x does by default.
NUTCH_SITEMAP_TRY_DEFAULT = True

# (nutchy only) Most URLs taken from one sitemap (the protocol's limit is 50,000).
NUTCH_SITEMAP_URLS_MAX = 50000

# The Solr index writer (docs/index.md): HTTP Basic password (with NUTCH_SOLR_AUTH_USERNAME).
NUTCH_SOLR_AUTH_PASSWORD = ""

# The Solr index writer: HTTP Basic user name; empty: no Basic auth.
NUTCH_SOLR_AUTH_USERNAME = ""

# The Solr index writer: a bearer token (Solr's JWT authentication plugin); empty: none.
NUTCH_SOLR_BEARER_TOKEN = ""

# The Solr index writer: commands (adds and deletes) in one update request at most.
NUTCH_SOLR_COMMIT_SIZE = 250

# The Solr index writer: first pause (ms) before a failed request is sent again, doubled each
# time (at most 60 s).
NUTCH_SOLR_EXPONENTIAL_BACKOFF_MILLIS = 100

# The Solr index writer: how many times a failed request is sent again before it gives up.
NUTCH_SOLR_EXPONENTIAL_BACKOFF_RETRIES = 10

# The Solr index writer: bytes of one update request's body at most (a larger document goes
# alone).
NUTCH_SOLR_MAX_BULK_SIZE = 2500500

# The Solr index writer: the collection's URL.
NUTCH_SOLR_SERVER_URL = "http://localhost:8983/solr/nutch"

# The Solr index writer: seconds to connect, and to wait for an answer.
NUTCH_SOLR_TIMEOUT = 30.0

# The Solr index writer: check the server's TLS certificate (True), not (False), or against the
# CA bundle at this path.
NUTCH_SOLR_TLS_VERIFY = True

# Prefix of the table name: "<crawl id>_webpage", or "webpage" when empty.
NUTCH_STORAGE_CRAWL_ID = ""

# The store: nutchy.store.embedded.EmbeddedStore (one SQLite file, no server) or
# nutchy.store.hbase.HBaseStore (HBase through its Thrift1 server). Nutch's own
# org.apache.gora.hbase.store.HBaseStore is accepted as a name for the latter.
NUTCH_STORAGE_DATA_STORE_CLASS = "nutchy.store.embedded.EmbeddedStore"

# (nutchy only) The most memory (MiB) SQLite's page cache takes on each connection to the
# embedded store (each process of a crawl has its own; pages not in it are read from the file,
# which the system's page cache holds).
NUTCH_STORE_EMBEDDED_CACHE_MB = 8

# Whether the server's IP address is stored in mtdt:_ip_.
NUTCH_STORE_IP_ADDRESS = False

# Rule file of the regex URL filter (Nutch's regex-urlfilter.txt format); empty for nutchy's own
# rules (nutchy/core/regex-urlfilter.txt).
NUTCH_URLFILTER_REGEX_FILE = ""

# (nutchy only) Folder of the WARC files; empty: <NUTCH_CRAWL_DIR>/warc.
NUTCH_WARC_DIR = ""

# (nutchy only) Whether the fetch writes every answer to gzipped WARC files (nutchy[warc]).
NUTCH_WARC_ENABLED = False

# (nutchy only) zlib level (0: stored, 1: fastest, 9: smallest) at which each WARC record is
# gzipped. 5: on doc-shaped pages, half the CPU of zlib's default 6 and a third of the 9 warcio
# uses, for files 6% larger (docs/benchmarks.md).
NUTCH_WARC_GZIP_LEVEL = 5

# (nutchy only) Bytes after which a WARC file is closed and the next one opened (1 GB, the usual
# size of WARC files).
NUTCH_WARC_MAX_SIZE = 1000000000

# (nutchy only) First part of the WARC files' names: <prefix>-<UTC time>-<serial>-<pid>.warc.gz.
NUTCH_WARC_PREFIX = "nutchy"

# (nutchy only) Answers waiting for the WARC writer thread at which the fetch pauses (no request
# starts) until half of them are written.
NUTCH_WARC_QUEUE_SIZE = 1000
