"""Manifest loading: YAML/JSON in, a validated and expanded `Manifest` out."""

from eq_tui.manifest.loader import load_manifest, load_manifest_text

__all__ = ["load_manifest", "load_manifest_text"]
