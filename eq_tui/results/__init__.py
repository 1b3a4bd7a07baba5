"""Results: what a sweep found. Metrics per job (parse), where they are on a host (sources),
results.jsonl (records), configurations over seeds (group), tables (render), `eq-tui results`."""
