// synthgen view: the run page's plots, drawn with uPlot from the JSON the
// server gives (/api/history, /api/dist) or, in a static report, from the
// data embedded in the page (#view-data). Every text that comes from the
// directory goes into the page as textContent, never as markup.
"use strict";
(function () {
  const info = {};
  window.synthgenPlots = info; // what each plot holds, for a test or a curious person
  const dataEl = document.getElementById("view-data");
  const embedded = dataEl ? JSON.parse(dataEl.textContent) : null;
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];
  const dpr = window.devicePixelRatio || 1;
  const drawn = []; // {u, box}
  let pending = 0;

  function begin() { pending++; }
  function end() {
    pending--;
    if (pending === 0) document.body.setAttribute("data-plots-ready", "1");
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  }

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 202) return r.json().then(function (p) { return { pending: p }; });
      if (!r.ok) return r.text().then(function (t) { throw new Error(url + ": " + r.status + " " + t); });
      return r.json();
    });
  }

  function fmt(v, digits) {
    if (v == null || !isFinite(v)) return "-";
    return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits == null ? 1 : digits });
  }

  // utc is a time (seconds) as the CLI prints one: ISO 8601, in UTC.
  function utc(sec) {
    return new Date(sec * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  // The time axis in UTC, as the CLI and the tables say it: the date where
  // it starts or changes, the time of day at every mark.
  const tzUTC = function (ts) { return uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); };
  function timeValues(u, splits) {
    let day = "";
    return splits.map(function (v) {
      if (v == null) return "";
      const s = utc(v), d = s.slice(0, 10), tod = s.slice(11, 19) + "Z";
      if (d === day) return tod;
      day = d;
      return tod + "\n" + d;
    });
  }

  // yUpTo is a count axis from 0 to a little above the highest count: a
  // plot of equal counts would otherwise run to twice them.
  function yUpTo(counts) {
    const hi = counts.reduce(function (a, b) { return Math.max(a, b); }, 0);
    return [0, Math.max(1, hi) * 1.08];
  }

  function widthOf(box) { return Math.max(320, box.clientWidth - 16); }

  window.addEventListener("resize", function () {
    drawn.forEach(function (d) { d.u.setSize({ width: widthOf(d.box), height: d.u.height }); });
  });

  // The marks on a time axis: each run's start (a resumed run says how
  // many keys it found done), the server's outages shaded, and, on the
  // in-flight plot, concurrency: auto's moves.
  // A run's label is drawn right of its line, inside its own run's span:
  // shortened ("run 2", then "2") where the whole does not fit, left out
  // where not even that does (the plot's note lists every run). What was
  // drawn, and where, is kept in labels (CSS pixels, for a test).
  function marks(h, withMoves, labels) {
    return {
      hooks: {
        draw: [function (u) {
          const ctx = u.ctx, top = u.bbox.top, hgt = u.bbox.height;
          const x = function (v) { return u.valToPos(v, "x", true); };
          ctx.save();
          ctx.beginPath();
          ctx.rect(u.bbox.left, top, u.bbox.width, hgt);
          ctx.clip();
          ctx.fillStyle = "rgba(214, 39, 40, 0.13)";
          h.outages.forEach(function (o) {
            const a = x(o.from), b = x(Math.max(o.to, o.from));
            ctx.fillRect(a, top, Math.max(b - a, 3 * dpr), hgt);
          });
          ctx.font = (11 * dpr) + "px system-ui, sans-serif";
          ctx.strokeStyle = "#344054";
          ctx.fillStyle = "#344054";
          ctx.lineWidth = dpr;
          ctx.setLineDash([4 * dpr, 3 * dpr]);
          // uPlot leaves the context as its last axis drew: the labels
          // start where they are put.
          ctx.textAlign = "left";
          ctx.textBaseline = "alphabetic";
          labels.length = 0;
          const right = u.bbox.left + u.bbox.width;
          h.runs.forEach(function (r, i) {
            const a = x(r.from);
            ctx.beginPath();
            ctx.moveTo(a, top);
            ctx.lineTo(a, top + hgt);
            ctx.stroke();
            const end = i + 1 < h.runs.length ? Math.min(x(h.runs[i + 1].from), right) : right;
            const from = Math.max(a, u.bbox.left);
            const texts = ["run " + r.run + (r.already_done > 0 ? " · resumed (" + fmt(r.already_done, 0) + " done)" : ""), "run " + r.run, String(r.run)];
            const text = texts.find(function (t) { return from + 4 * dpr + ctx.measureText(t).width + 2 * dpr <= end; });
            if (text == null) return;
            const at = from + 4 * dpr, w = ctx.measureText(text).width;
            ctx.fillText(text, at, top + (12 + 12 * (i % 2)) * dpr);
            // Where the text went, by the alignment it was drawn with.
            const left = { right: at - w, end: at - w, center: at - w / 2 }[ctx.textAlign] || at;
            labels.push({ run: r.run, text: text, left: left / dpr, right: (left + w) / dpr, seg_left: a / dpr, seg_right: end / dpr });
          });
          if (h.outages.length) {
            ctx.fillStyle = "#b42318";
            h.outages.forEach(function (o) { ctx.fillText("server down", x(o.from) + 4 * dpr, top + hgt - 6 * dpr); });
          }
          if (withMoves) {
            ctx.setLineDash([]);
            ctx.fillStyle = "#ff7f0e";
            h.moves.forEach(function (m) {
              const a = x(m.t);
              ctx.beginPath();
              ctx.moveTo(a - 4 * dpr, top);
              ctx.lineTo(a + 4 * dpr, top);
              ctx.lineTo(a, top + 7 * dpr);
              ctx.closePath();
              ctx.fill();
            });
          }
          ctx.restore();
        }],
      },
    };
  }

  // withGaps puts a point without values between two runs, so that a
  // line does not join the end of one run to the start of the next.
  function withGaps(h, ys) {
    const bounds = [];
    let k = 0;
    h.runs.forEach(function (r, i) { if (i > 0) bounds.push(k); k += r.points; });
    const xs = [], out = ys.map(function () { return []; });
    let b = 0;
    for (let i = 0; i < h.t.length; i++) {
      if (b < bounds.length && i === bounds[b]) {
        xs.push((h.t[i - 1] + h.t[i]) / 2);
        out.forEach(function (o) { o.push(null); });
        b++;
      }
      xs.push(h.t[i]);
      ys.forEach(function (y, j) { out[j].push(y[i] == null ? null : y[i]); });
    }
    return { data: [xs].concat(out), gaps: b };
  }

  function hasValues(vals) { return vals.some(function (v) { return v != null; }); }

  function addPlot(container, id, title, note) {
    const box = el("div", "plot");
    box.id = id;
    box.appendChild(el("h4", null, title));
    if (note) box.appendChild(el("p", "legendnote", note));
    container.appendChild(box);
    return box;
  }

  // timePlot draws series over h's time axis; a series without a single
  // value is left out, a plot without any is not drawn.
  function timePlot(container, id, title, h, series, opt) {
    opt = opt || {};
    series = series.filter(function (s) { return s.values && hasValues(s.values); });
    if (!series.length) return;
    const box = addPlot(container, id, title, opt.note);
    const g = withGaps(h, series.map(function (s) { return s.values; }));
    const scales = { x: { time: true } };
    const axes = [{}, { scale: "y", size: 64, label: opt.y || "" }];
    if (series.some(function (s) { return s.scale === "y2"; })) {
      scales.y2 = {};
      axes.push({ scale: "y2", side: 1, size: 64, label: opt.y2 || "", grid: { show: false } });
    }
    if (opt.percent) scales.y = { range: [0, 100] };
    axes[0] = { values: timeValues, space: 80 };
    // Each series its own colour: the ones given, then the palette's
    // that no given one took.
    const given = series.map(function (s) { return s.color; }).filter(Boolean);
    const free = colors.filter(function (c) { return given.indexOf(c) < 0; });
    let k = 0;
    const strokes = series.map(function (s) { return s.color || free[k++ % free.length]; });
    const labels = [];
    const u = new uPlot({
      width: widthOf(box), height: 230, tzDate: tzUTC,
      scales: scales, axes: axes,
      series: [{ label: "time (UTC)", value: function (_, v) { return v == null ? "-" : utc(v); } }].concat(series.map(function (s, i) {
        return {
          label: s.label, scale: s.scale || "y", stroke: strokes[i],
          width: 1.5, dash: s.dash, spanGaps: false, points: { show: false },
        };
      })),
      plugins: [marks(h, opt.moves, labels)],
    }, g.data, box);
    if (h.runs.length > 1) {
      box.appendChild(el("p", "legendnote runs", h.runs.map(function (r) {
        return "run " + r.run + " from " + utc(r.from) + (r.already_done > 0 ? ", resumed (" + fmt(r.already_done, 0) + " done)" : "");
      }).join(" · ")));
    }
    drawn.push({ u: u, box: box });
    box.setAttribute("data-points", String(h.points));
    info[id] = {
      title: title, points: h.points, drawn: g.data[0].length, gaps: g.gaps, series: series.map(function (s) { return s.label; }),
      labels: labels,
      // The colours uPlot draws with, as it holds them.
      get strokes() { return u.series.slice(1).map(function (s, i) { return typeof s.stroke === "function" ? s.stroke(u, i + 1) : s.stroke; }); },
    };
    if (opt.moves && h.moves.length) {
      const t = el("table", "moves");
      const head = el("tr");
      ["auto moved at", "limit", "why"].forEach(function (c) { head.appendChild(el("th", null, c)); });
      t.appendChild(head);
      h.moves.slice(-12).forEach(function (m) {
        const tr = el("tr");
        tr.appendChild(el("td", null, utc(m.t)));
        tr.appendChild(el("td", null, m.limit));
        tr.appendChild(el("td", null, m.reason));
        t.appendChild(tr);
      });
      box.appendChild(t);
    }
  }

  function drawHistory(container, h, d) {
    container.textContent = "";
    if (h.note) container.appendChild(el("p", "pending", h.note));
    if (h.skipped) container.appendChild(el("p", "problem", h.skipped + " lines of history.jsonl do not read"));
    if (!h.points) return;
    const L = h.lines, p = "d" + d + "-";
    timePlot(container, p + "tok", "tokens per second: the client's beside the server's", h, [
      { label: "client, last 10 s", values: L.tok_per_s_10s },
      { label: "server (/metrics)", values: L.server_gen_tok_per_s },
      { label: "client, whole run", values: L.tok_per_s, dash: [5, 4] },
    ], { y: "tok/s", note: "tok/s is what the server does; req/s (below) lags it while long answers ramp up" });
    // req/s counts keys (a record each); with several turns a key the
    // servers took more requests, a series of its own (all null, and so
    // left out, with one turn a key).
    timePlot(container, p + "req", "keys answered per second (req/s) and keys done", h, [
      { label: "keys/s, last 10 s", values: L.req_per_s_10s },
      { label: "keys/s, whole run", values: L.req_per_s, dash: [5, 4] },
      { label: "requests/s, every turn, whole run", values: L.requests_per_s, dash: [2, 3] },
      { label: "keys done", values: L.done, scale: "y2", color: "#7f7f7f" },
    ], {
      y: "per s", y2: "done",
      note: "req/s counts keys: with generation.turns: all a conversation is one key and a request a turn",
    });
    timePlot(container, p + "inflight", "keys in flight, paced, and the limit", h, [
      { label: "in flight (keys holding a slot)", values: L.in_flight },
      { label: "paced (of them, waiting for a rate limit's share)", values: L.paced, color: "#9467bd" },
      { label: "limit", values: L.limit, dash: [6, 3], color: "#ff7f0e" },
      { label: "server running", values: L.server_running },
      { label: "no byte yet", values: L.no_byte_yet },
    ], {
      moves: true,
      note: "in flight: keys holding a slot, sent or waiting (paced: for a rate limit's share; or between turns); " +
        "the server runs in flight − paced at most. The limit is concurrency, or concurrency: auto's limit in force, " +
        "which steers the requests sent: slots it has lowered empty as their answers come" +
        (h.moves.length ? ". ▼ auto moved the limit (the last moves below)" : ""),
    });
    timePlot(container, p + "queue", "the server's queue and preemptions", h, [
      { label: "waiting", values: L.server_waiting },
      { label: "preemptions (per scrape window)", values: L.preemptions, scale: "y2", color: "#d62728" },
    ], { y: "requests", y2: "preemptions" });
    timePlot(container, p + "kv", "the server's KV cache use and prefix-cache hit rate", h, [
      { label: "KV cache %", values: L.kv_cache_usage },
      { label: "prefix cache hits % (of prompt tokens)", values: L.prefix_cache_hit_rate, dash: [5, 4] },
    ], { y: "%", percent: true });
    const errs = [
      { label: "failed for good", values: L.errors, color: "#b42318" },
      { label: "retries", values: L.retries, color: "#ff7f0e", dash: [5, 4] },
    ];
    Object.keys(h.errors_by_cause).sort().forEach(function (c, i) {
      errs.push({ label: "failed: " + c, values: h.errors_by_cause[c], color: colors[(i + 4) % colors.length] });
    });
    Object.keys(h.retries_by_cause).sort().forEach(function (c, i) {
      errs.push({ label: "retried: " + c, values: h.retries_by_cause[c], color: colors[(i + 6) % colors.length], dash: [5, 4] });
    });
    timePlot(container, p + "errors", "errors and retries by cause (counts of each run)", h, errs, { y: "count" });
    if (h.endpoints && h.endpoints.length) {
      timePlot(container, p + "endpoints", "each endpoint's share of tok/s", h, h.endpoints.map(function (e) {
        return { label: e.url, values: e.share };
      }), { y: "%", percent: true });
    }
  }

  function histPlot(container, id, title, hist, mark) {
    // The axis runs to the data; a mark beyond it (max_tokens far above
    // the longest answer) is named in the note instead of drawn.
    const top = hist.width * hist.counts.length;
    let beyond = "";
    if (mark && mark.at > top * 1.25) {
      beyond = " · " + mark.label + ", beyond the longest answer";
      mark = null;
    }
    const box = addPlot(container, id, title,
      "n " + fmt(hist.n, 0) + " · mean " + fmt(hist.mean) + " · p50 " + fmt(hist.p50, 3) + " · p90 " + fmt(hist.p90, 3) +
      " · max " + fmt(hist.max, 3) + " " + hist.unit + beyond);
    const xs = hist.counts.map(function (_, i) { return (i + 0.5) * hist.width; });
    const plugins = [];
    if (mark) {
      plugins.push({
        hooks: {
          draw: [function (u) {
            const ctx = u.ctx, a = u.valToPos(mark.at, "x", true);
            ctx.save();
            ctx.strokeStyle = "#b42318";
            ctx.fillStyle = "#b42318";
            ctx.lineWidth = 1.5 * dpr;
            ctx.setLineDash([5 * dpr, 3 * dpr]);
            ctx.beginPath();
            ctx.moveTo(a, u.bbox.top);
            ctx.lineTo(a, u.bbox.top + u.bbox.height);
            ctx.stroke();
            ctx.font = (11 * dpr) + "px system-ui, sans-serif";
            ctx.textAlign = "right";
            ctx.fillText(mark.label, a - 4 * dpr, u.bbox.top + 12 * dpr);
            ctx.restore();
          }],
        },
      });
    }
    const hi = Math.max(top, mark ? mark.at * 1.02 : 0);
    const u = new uPlot({
      width: widthOf(box), height: 200,
      scales: { x: { time: false, range: [0, hi] }, y: { range: yUpTo(hist.counts) } },
      axes: [{ label: hist.unit }, { size: 60, label: "records" }],
      series: [{ label: hist.unit }, {
        label: "records", stroke: colors[0], fill: "rgba(31, 119, 180, 0.35)",
        paths: uPlot.paths.bars({ size: [0.95, 100] }), points: { show: false },
      }],
      legend: { show: false },
      plugins: plugins,
    }, [xs, hist.counts], box);
    drawn.push({ u: u, box: box });
    const total = hist.counts.reduce(function (a, b) { return a + b; }, 0);
    box.setAttribute("data-points", String(hist.counts.length));
    box.setAttribute("data-total", String(total));
    info[id] = { title: title, points: hist.counts.length, total: total, high: yUpTo(hist.counts)[1] / 1.08, get ymax() { return u.scales.y.max; } };
  }

  function finishPlot(container, d) {
    const names = d.finish_reasons.map(function (f) { return f.name.length > 18 ? f.name.slice(0, 17) + "…" : f.name; });
    const counts = d.finish_reasons.map(function (f) { return f.count; });
    const box = addPlot(container, "finish", "finish reasons (and failed keys by cause)");
    if (!names.length) return;
    const xs = names.map(function (_, i) { return i; });
    const u = new uPlot({
      width: widthOf(box), height: 200,
      scales: { x: { time: false, range: [-0.5, names.length - 0.5] }, y: { range: yUpTo(counts) } },
      axes: [{ splits: function () { return xs; }, values: function (_, splits) { return splits.map(function (v) { return names[v] == null ? "" : names[v]; }); } },
        { size: 60, label: "records" }],
      series: [{}, { label: "records", stroke: colors[2], fill: "rgba(44, 160, 44, 0.35)", paths: uPlot.paths.bars({ size: [0.7, 120] }), points: { show: false } }],
      legend: { show: false },
    }, [xs, counts], box);
    drawn.push({ u: u, box: box });
    box.setAttribute("data-points", String(names.length));
    info.finish = { title: "finish reasons", points: names.length, total: counts.reduce(function (a, b) { return a + b; }, 0), high: yUpTo(counts)[1] / 1.08, get ymax() { return u.scales.y.max; } };
  }

  function drawDist(d) {
    const counts = document.getElementById("dist-counts");
    const plots = document.getElementById("dist-plots");
    counts.textContent = "";
    plots.textContent = "";
    const t = el("table", "figures");
    const rows = [
      ["records", "records", d.records],
      ["failed", "keys failed for good", d.failed],
      ["answered_after_errors", "answered after failing", d.answered_after_errors],
      ["truncated", "cut at max_tokens (finish_reason length)", d.truncated],
      ["empty_reasoning", "empty reasoning", d.empty_reasoning],
      ["think_tags", "think tags in content", d.think_tags],
      ["tool_call_records", "with tool calls (any turn)", d.tool_call_records],
      ["diverged", "diverged from the row's tool calls", d.diverged],
      ["prompt_tokens", "prompt tokens", d.prompt_tokens],
      ["completion_tokens", "completion tokens", d.completion_tokens],
    ];
    d.finish_reasons.forEach(function (f) { rows.push(["finish:" + f.name, "finish_reason " + f.name, f.count]); });
    rows.forEach(function (r) {
      const tr = el("tr");
      tr.setAttribute("data-key", r[0]);
      tr.appendChild(el("th", null, r[1]));
      const td = el("td", "v", fmt(r[2], 0));
      td.setAttribute("data-value", String(r[2]));
      tr.appendChild(td);
      t.appendChild(tr);
    });
    counts.appendChild(t);
    histPlot(plots, "completion", "completion tokens", d.completion_tokens_hist,
      d.max_tokens > 0 ? { at: d.max_tokens, label: "max_tokens " + d.max_tokens } : null);
    histPlot(plots, "reasoning", "reasoning length", d.reasoning_chars_hist);
    histPlot(plots, "content", "content length", d.content_chars_hist);
    histPlot(plots, "latency", "latency", d.latency_hist);
    histPlot(plots, "ttft", "time to first token", d.ttft_hist);
    finishPlot(plots, d);
  }

  function loadDist() {
    const status = document.getElementById("dist-status");
    if (!status) return;
    begin();
    const once = function () {
      const p = embedded ? Promise.resolve(embedded.dist) : getJSON("/api/dist");
      p.then(function (d) {
        if (d.pending) {
          const pr = d.pending;
          status.textContent = "indexing the records: " + fmt(pr.bytes ? 100 * pr.bytes_read / pr.bytes : 0) + "% (" + fmt(pr.records, 0) + " records)";
          setTimeout(once, 500);
          return;
        }
        status.textContent = "";
        drawDist(d);
        end();
      }).catch(function (e) { status.textContent = String(e); status.className = "problem"; end(); });
    };
    once();
  }

  function loadHistory(container) {
    const d = Number(container.getAttribute("data-dir"));
    begin();
    const p = embedded ? Promise.resolve(embedded.history[d]) : getJSON("/api/history?dir=" + d);
    p.then(function (h) {
      for (let i = drawn.length - 1; i >= 0; i--) {
        if (container.contains(drawn[i].box)) {
          drawn[i].u.destroy();
          drawn.splice(i, 1);
        }
      }
      drawHistory(container, h, d);
      end();
    }).catch(function (e) {
      container.textContent = "";
      container.appendChild(el("p", "problem", String(e)));
      end();
    });
  }

  document.querySelectorAll(".plots[data-dir]").forEach(loadHistory);
  loadDist();
  // A live run's plots follow it: its history every 10 s, the records on
  // disk every 30 s (for a million records they take the server a second).
  if (!embedded && document.querySelector(".live")) {
    setInterval(function () { document.querySelectorAll(".plots[data-dir]").forEach(loadHistory); }, 10000);
    setInterval(function () {
      for (let i = drawn.length - 1; i >= 0; i--) {
        if (document.getElementById("dist-plots").contains(drawn[i].box)) {
          drawn[i].u.destroy();
          drawn.splice(i, 1);
        }
      }
      loadDist();
    }, 30000);
  }
})();
