"""The generic profile (spec §7): the JSON data model as GCF."""
