-- The worked pipeline's last step (docs/recipes.md, "A worked pipeline"): keep the
-- answers the judge scored 8 or more. out/qa-all.jsonl is the first pass
-- exported as training rows (synthgen export out/qa-answers --format
-- messages --reasoning drop --out out/qa-all.jsonl); the judge's records
-- carry the first pass's ids, and their content is {"score", "reason"}.
-- Run from the directory holding out/: duckdb -c ".read examples/qa-keep.sql"
-- (DuckDB is one binary, not part of synthgen: https://duckdb.org/docs/installation,
-- e.g. `pip install duckdb-cli`, `brew install duckdb`, or the release's
-- duckdb_cli-linux-amd64.zip unpacked onto PATH.)
COPY (
  SELECT a.*
  FROM read_json('out/qa-all.jsonl') a
  JOIN read_parquet('out/qa-judged/data/*.parquet') j ON j.id = a.id
  WHERE (j.content ->> '$.score')::INTEGER >= 8
  ORDER BY a.id::BIGINT
) TO 'out/qa-train.jsonl' (FORMAT json);
