// duckdb_check.mjs reads a synthgen Parquet output directory with DuckDB, a
// Parquet reader that shares no code with parquet-go, and prints what it
// sees as one JSON object on stdout:
//
//   {"columns": [{"name": "id", "type": "VARCHAR"}, ...],  DESCRIBE of the shards
//    "rows": 120, "distinct_keys": 120,                    row and (id, sample) counts
//    "record": {"id": "7", "messages": [...], ...}}        the row of the id asked for
//
// Usage: NODE_PATH=/path/to/node_modules node duckdb_check.mjs DIR ID
// (the module is @duckdb/node-api; cmd/synthgen's TestParquetReadByDuckDB
// runs this script and compares the answer with what parquet-go reads).
import { createRequire } from 'node:module';
import path from 'node:path';

const [dir, id] = process.argv.slice(2);
if (!dir || id === undefined) {
  console.error('usage: node duckdb_check.mjs DIR ID');
  process.exit(2);
}

// NODE_PATH is honoured by require, not by ESM import.
const require = createRequire(import.meta.url);
const { DuckDBInstance } = require('@duckdb/node-api');

// A SQL string literal: DuckDB doubles single quotes.
const lit = (s) => `'${String(s).replaceAll("'", "''")}'`;
const shards = lit(path.join(dir, 'data', '*.parquet'));

const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const query = async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJson();

const columns = (await query(`DESCRIBE SELECT * FROM read_parquet(${shards})`))
  .map((r) => ({ name: r.column_name, type: r.column_type }));
const [counts] = await query(
  `SELECT count(*)::INTEGER AS n, count(DISTINCT (id, sample))::INTEGER AS k FROM read_parquet(${shards})`);
const records = await query(`SELECT * FROM read_parquet(${shards}) WHERE id = ${lit(id)} AND sample = 0`);
if (records.length !== 1) {
  console.error(`id ${id}: ${records.length} rows, want 1`);
  process.exit(1);
}
process.stdout.write(JSON.stringify({
  columns,
  rows: counts.n,
  distinct_keys: counts.k,
  record: records[0],
}) + '\n');
