"""Spiders of the nutchy Scrapy project in this repository."""
