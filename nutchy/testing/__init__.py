"""Test doubles for nutchy's backends: an in-memory HBase Thrift1 server for real happybase."""
