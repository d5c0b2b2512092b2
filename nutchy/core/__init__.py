"""nutchy's pure domain: no Scrapy, Twisted, happybase or Redis."""
