// duckdb_tokens.mjs reads the token columns of a synthgen Parquet output
// directory with DuckDB (a Parquet reader that shares no code with
// parquet-go) and prints one JSON object on stdout:
//
//   {"rows": [{"id": "0", "prompt_token_ids": [...], "token_ids": [...],
//              "completion_tokens": "57", "logprobs": {...}, "turns": [...]}, ...],
//    "turns": 60,            the turns of every record, unnested in SQL
//    "turns_agreeing": 60}   of them, those whose len(token_ids) = completion_tokens
//
// Usage: NODE_PATH=/path/to/node_modules node duckdb_tokens.mjs DIR
// (cmd/synthgen's TestParquetTokensReadByDuckDB runs it and compares every
// row with what parquet-go reads).
import { createRequire } from 'node:module';
import path from 'node:path';

const [dir] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node duckdb_tokens.mjs DIR');
  process.exit(2);
}
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');

const parts = `'${path.join(dir, 'data', '*.parquet').replaceAll("'", "''")}'`;
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const query = async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJson();

const rows = await query(
  `SELECT id, prompt_token_ids, token_ids, token_ids_mismatch, completion_tokens, logprobs, turns
   FROM read_parquet(${parts}) ORDER BY id`);
const [counts] = await query(
  `SELECT count(*)::INTEGER AS n,
          count(*) FILTER (WHERE len(t.token_ids) = t.completion_tokens)::INTEGER AS agreeing
   FROM (SELECT unnest(turns) AS t FROM read_parquet(${parts}))`);
process.stdout.write(JSON.stringify({ rows, turns: counts.n, turns_agreeing: counts.agreeing }) + '\n');
