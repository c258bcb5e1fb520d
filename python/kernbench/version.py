"""The package's version, in a module of its own so that any module can read it without importing the
package's ``__init__`` (which imports most of the package: sweepjson doing so made an import cycle)."""

__version__ = "0.1.0"
