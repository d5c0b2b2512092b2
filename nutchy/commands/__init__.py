"""nutchy's Scrapy commands: ``scrapy inject`` inside a Scrapy project.

Scrapy finds them through the ``scrapy.commands`` entry point group, or through a project's
``COMMANDS_MODULE = "nutchy.commands"`` setting. Each one delegates to the same code as the
``nutchy`` command.
"""
