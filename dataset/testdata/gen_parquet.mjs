// gen_parquet.mjs writes the Parquet test files of package dataset with DuckDB,
// so the Go reader is tested against files another implementation wrote (the
// shapes the Hub, pyarrow and DuckDB produce: LIST of STRUCT). It also writes
// one golden JSONL per file with the prompt every row must yield, computed
// here independently of the Go code.
//
// Regenerate (DuckDB is installed outside the repo):
//
//	mkdir -p /tmp/duck && cd /tmp/duck && npm install @duckdb/node-api
//	NODE_PATH=/tmp/duck/node_modules node dataset/testdata/gen_parquet.mjs
//
// Run from the repository root. The output is deterministic.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(import.meta.url);
// require (not import) so that NODE_PATH finds the scratch install.
const { DuckDBInstance } = require('@duckdb/node-api');

const outDir = path.join('dataset', 'testdata');

const topics = [
  'Explain the difference between a process and a thread.',
  'Write a Python function that returns the n-th Fibonacci number.',
  'What is 17 * 23? Show your work.',
  '¿Cuál es la capital de Australia y por qué no es Sídney?',
  '请用三句话解释什么是机器学习。',
  'Summarize the plot of Hamlet in two sentences. 🎭',
  'Give me a haiku about autumn rain.',
  'How do I reverse a linked list in Go?',
  'Résumez les causes de la Révolution française.',
  'If a train leaves at 3 pm going 60 mph, when has it travelled 150 miles?',
  'List three uses of the Fourier transform.',
  '日本語で自己紹介を書いてください。',
  'What does the `defer` keyword do in Go?',
  'Prove that the square root of 2 is irrational.',
];
const sources = ['MetaMath', 'airoboros', 'slimorca', 'WizardLM', 'ultrafeedback', 'code_instructions_122k'];

// sharegpt rows: conversations list<struct<from, value>>, source varchar.
function sharegptRows() {
  const rows = [];
  for (let i = 0; i < 36; i++) {
    const q = topics[i % topics.length];
    const conv = [];
    if (i % 5 === 2) conv.push({ from: 'system', value: 'You are a concise assistant. Row ' + i + '.' });
    if (i % 9 === 4) conv.push({ from: 'system', value: '' }); // empty system turns are dropped
    conv.push({ from: i % 2 ? 'human' : 'user', value: q + ' (#' + i + ')' });
    conv.push({ from: i % 3 ? 'gpt' : 'assistant', value: 'Answer ' + i + ': ' + 'lorem ipsum '.repeat(1 + (i % 4)) });
    if (i % 4 === 3) {
      conv.push({ from: 'human', value: 'Can you elaborate? ✨' });
      conv.push({ from: 'gpt', value: 'Sure, more detail for row ' + i + '.' });
    }
    rows.push({ conversations: conv, source: i % 7 === 6 ? null : sources[i % sources.length] });
  }
  // Bad rows keep their index: one that opens with the assistant, one with no conversation.
  rows[7] = { conversations: [{ from: 'gpt', value: 'I speak first.' }], source: 'slimorca' };
  rows[19] = { conversations: [], source: 'MetaMath' };
  return rows;
}

const roleOf = { human: 'user', user: 'user', gpt: 'assistant', assistant: 'assistant', model: 'assistant', system: 'system' };

// expected is the prompt rule, written again here: turns up to the first
// assistant turn, empty system turns dropped, at least one user turn.
function expected(index, turns, source, id) {
  const msgs = [];
  for (const t of turns) {
    if (t.role === 'assistant') break;
    if (t.role === 'system' && t.content === '') continue;
    msgs.push({ role: t.role, content: t.content });
  }
  if (!msgs.some((m) => m.role === 'user')) return { index, bad: true };
  return { index, id: id ?? String(index), source: source ?? '', messages: msgs };
}

function messagesRows() {
  const rows = [];
  for (let i = 0; i < 24; i++) {
    const msgs = [];
    if (i % 3 === 0) msgs.push({ role: 'system', content: 'Think step by step.' });
    msgs.push({ role: 'user', content: topics[(i * 5) % topics.length] });
    msgs.push({ role: 'assistant', content: 'ok ' + i });
    if (i % 4 === 1) {
      msgs.push({ role: 'user', content: 'And in one word? 🤔' });
      msgs.push({ role: 'assistant', content: 'Yes.' });
    }
    rows.push({ uid: 1000 + i * 7, messages: msgs, category: sources[(i + 2) % sources.length] });
  }
  return rows;
}

function promptRows() {
  const rows = [];
  for (let i = 0; i < 20; i++) rows.push({ prompt: topics[(i * 3) % topics.length] + ' [' + i + ']', source: sources[i % sources.length] });
  return rows;
}

async function main() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'genparquet-'));
  const inst = await DuckDBInstance.create(':memory:');
  const con = await inst.connect();

  async function write(name, rows, columns, copyOpts) {
    const src = path.join(tmp, name + '.jsonl');
    fs.writeFileSync(src, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const cols = Object.entries(columns).map(([k, v]) => `'${k}': '${v}'`).join(', ');
    await con.run(`COPY (SELECT * FROM read_json('${src}', format='newline_delimited', columns={${cols}}))
      TO '${path.join(outDir, name + '.parquet')}' (FORMAT parquet, ${copyOpts})`);
  }
  function golden(name, lines) {
    fs.writeFileSync(path.join(outDir, name + '.golden.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  }

  const sg = sharegptRows();
  const sgCols = { conversations: 'STRUCT("from" VARCHAR, "value" VARCHAR)[]', source: 'VARCHAR' };
  await write('sharegpt_snappy', sg, sgCols, 'COMPRESSION snappy');
  // DuckDB rounds ROW_GROUP_SIZE up to its vector size, so this is still one
  // row group; parquet_test.go writes a many-group file with parquet-go.
  await write('sharegpt_zstd', sg, sgCols, 'COMPRESSION zstd, ROW_GROUP_SIZE 8');
  golden('sharegpt', sg.map((r, i) => expected(i, r.conversations.map((t) => ({ role: roleOf[t.from], content: t.value })), r.source)));

  const ms = messagesRows();
  await write('messages', ms, { uid: 'BIGINT', messages: 'STRUCT("role" VARCHAR, "content" VARCHAR)[]', category: 'VARCHAR' }, 'COMPRESSION zstd');
  golden('messages', ms.map((r, i) => expected(i, r.messages, r.category, String(r.uid))));

  const ps = promptRows();
  await write('prompt', ps, { prompt: 'VARCHAR', source: 'VARCHAR' }, 'COMPRESSION snappy');
  golden('prompt', ps.map((r, i) => expected(i, [{ role: 'user', content: r.prompt }], r.source)));

  fs.rmSync(tmp, { recursive: true });
}

await main();
