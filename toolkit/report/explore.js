// The diagnosis page's query explorer: a per-query table that sorts and filters over every query and draws the
// rows in view (virtual scrolling), and for the query in the address (#q=<id>) every system's top k side by side.
// Reads <script id="explore-data">: an envelope {format, version, encoding, data} around a columnar payload, plain
// JSON or gzip-compressed and base64-encoded (decompressed with the browser's own DecompressionStream); the format
// is written and documented by toolkit/report/diagnosis_explore.py. Needs no network and no library; builds every
// element with textContent, never HTML from data.
(function () {
  "use strict";
  const root = document.getElementById("explore");
  const table = document.getElementById("explore-table");
  const wrap = table.parentElement;
  const count = document.getElementById("explore-count");
  const detail = document.getElementById("query-detail");
  const state = {sort: null, desc: false, filters: {}, view: [], start: 0, end: 0, rowHeight: 24, selected: null};
  const OVERSCAN = 60;  // rows drawn above and below the visible ones
  const collator = new Intl.Collator(undefined, {numeric: true});
  let DATA = null, BY_ID = null;

  // ---- the data: the envelope, the payload's columns back to rows, the views back to per-query lists
  function rowsOf(t) {
    const rows = Array.from({length: t.n}, () => ({}));
    const absent = t.absent || {};
    t.keys.forEach((key, j) => {
      const values = t.values[j], gone = new Set(absent[key] || []);
      for (let i = 0; i < t.n; i++) if (!gone.has(i)) rows[i][key] = values[i];
    });
    return rows;
  }

  function viewsOf(c) {
    const views = {};
    c.queries.forEach((q, i) => {
      const docs = c.docs[i], grades = c.grades[i], top = {}, ranks = {}, snippets = {};
      for (const s of c.systems) {
        top[s] = c.top[s][i].map(j => [docs[j], grades[j]]);
        ranks[s] = {};
        c.ranks[s][i].forEach((r, j) => { if (r !== null) ranks[s][docs[j]] = r; });
      }
      c.snippets[i].forEach((t, j) => { if (t !== null) snippets[docs[j]] = t; });
      views[q] = {top: top, ranks: ranks, snippets: snippets, terms: c.terms[i]};
    });
    return views;
  }

  // each query's detail lines repeat its row's values: every first stage once, then every reranked run
  const FROM_ROW = [["value", "m"], ["delta", "delta"], ["ceiling", "ceiling"], ["lost_c", "lost_c"],
                    ["lost_r", "lost_r"], ["label", "label"], ["rbo", "rbo"], ["tau", "tau"], ["judged", "judged"]];
  function detailOf(rows, systems) {
    const out = {};
    const reranked = systems.filter(s => s.role === "reranked");
    const got = v => v === undefined ? null : v;
    for (const row of rows) {
      const lines = [];
      for (const s of reranked) {
        if (!Object.prototype.hasOwnProperty.call(row, "label:" + s.name)) continue;
        if (!lines.some(x => x.system === s.first_stage)) {
          lines.push({system: s.first_stage, role: "first stage", value: got(row["m:" + s.first_stage]),
                      judged: got(row["judged:" + s.first_stage])});
        }
        const line = {system: s.name, role: s.detail_role};
        for (const [k, col] of FROM_ROW) line[k] = got(row[col + ":" + s.name]);
        lines.push(line);
      }
      if (lines.length) {
        lines.sort((a, b) => (a.role !== "first stage") - (b.role !== "first stage"));  // stable: first stages first
        out[row.query_id] = lines;
      }
    }
    return out;
  }

  function decode(payload) {
    const data = Object.assign({}, payload.meta);
    data.rows = rowsOf(payload.rows);
    data.detail_rows = payload.detail_rows || detailOf(data.rows, data.systems);
    data.views = payload.views_plain || viewsOf(payload.views);
    data.missed = payload.missed;
    return data;
  }

  async function gunzip(base64) {
    const text = atob(base64);
    const bytes = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function el(tag, attrs, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "text") e.textContent = v;
      else if (k === "cls") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children || []) e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    return e;
  }

  function fmt(v, kind) {
    if (v === null || v === undefined || (typeof v === "number" && isNaN(v))) return "–";
    if (kind === "num") return Number(v).toFixed(4);
    return String(v);
  }

  // "<0.5", ">= 0.2", "=1", "0.2..0.6", or a bare number (equal to 4 decimals)
  function numericTest(text) {
    const t = text.trim();
    if (!t) return null;
    let m = t.match(/^(-?[\d.]+)\s*\.\.\s*(-?[\d.]+)$/);
    if (m) { const lo = +m[1], hi = +m[2]; return v => v >= lo && v <= hi; }
    m = t.match(/^(<=|>=|<|>|=)?\s*(-?[\d.]+)$/);
    if (!m) return () => false;
    const x = +m[2];
    switch (m[1]) {
      case "<": return v => v < x;
      case "<=": return v => v <= x;
      case ">": return v => v > x;
      case ">=": return v => v >= x;
      default: return v => Math.abs(v - x) < 5e-5;
    }
  }

  function passes(row) {
    for (const col of DATA.columns) {
      const f = state.filters[col.key];
      if (f === undefined || f === "") continue;
      const v = row[col.key];
      if (col.kind === "cat") { if (String(v) !== f) return false; }
      else if (col.kind === "num") {
        const test = numericTest(f);
        if (test && (v === null || v === undefined || isNaN(v) || !test(v))) return false;
      } else if (!String(v === null ? "" : v).toLowerCase().includes(f.toLowerCase())) return false;
    }
    return true;
  }

  function compare(col, a, b) {
    let x = a[state.sort], y = b[state.sort];
    const missing = v => v === null || v === undefined || (typeof v === "number" && isNaN(v));
    if (missing(x) && missing(y)) return a.query_id < b.query_id ? -1 : 1;
    if (missing(x)) return 1;  // missing values last in either direction
    if (missing(y)) return -1;
    let c = col.kind === "num" ? x - y : collator.compare(String(x), String(y));
    if (c === 0) c = a.query_id < b.query_id ? -1 : a.query_id > b.query_id ? 1 : 0;
    return state.desc ? -c : c;
  }

  function buildHead() {
    const thead = table.querySelector("thead");
    const names = el("tr");
    const filters = el("tr", {cls: "filters"});
    for (const col of DATA.columns) {
      const th = el("th", {"data-key": col.key, title: "sort by " + col.label, role: "button"}, [col.label]);
      th.addEventListener("click", () => {
        state.desc = state.sort === col.key ? !state.desc : false;
        state.sort = col.key;
        render();
      });
      names.appendChild(th);
      let input;
      if (col.kind === "cat") {
        input = el("select", {"data-filter": col.key}, [el("option", {value: "", text: "all"})]);
        const seen = [...new Set(DATA.rows.map(r => r[col.key]))].sort();
        for (const v of seen) input.appendChild(el("option", {value: String(v), text: String(v)}));
        input.addEventListener("change", () => { state.filters[col.key] = input.value; render(); });
      } else {
        input = el("input", {"data-filter": col.key, size: col.kind === "num" ? "7" : "12",
                             placeholder: col.kind === "num" ? "<0.5, 0.2..0.6" : "contains"});
        input.addEventListener("input", () => { state.filters[col.key] = input.value; render(); });
      }
      filters.appendChild(el("th", {}, [input]));
    }
    thead.appendChild(names);
    thead.appendChild(filters);
  }

  // filter and sort every query, then draw the rows in view
  function render() {
    let rows = DATA.rows.filter(passes);
    if (state.sort) {
      const col = DATA.columns.find(c => c.key === state.sort);
      rows = rows.slice().sort((a, b) => compare(col, a, b));
    }
    for (const th of table.querySelectorAll("thead th[data-key]")) {
      const on = th.dataset.key === state.sort;
      th.setAttribute("aria-sort", on ? (state.desc ? "descending" : "ascending") : "none");
    }
    state.view = rows;
    drawWindow();
    count.textContent = rows.length + " of " + DATA.rows.length + " queries shown";
  }

  function spacer(height) {
    const td = el("td", {colspan: String(DATA.columns.length)});
    td.style.height = height + "px";
    td.style.padding = "0";
    return el("tr", {cls: "spacer", "aria-hidden": "true"}, [td]);
  }

  function rowElement(row) {
    const tr = el("tr", {"data-qid": row.query_id});
    for (const col of DATA.columns) {
      const v = row[col.key];
      const td = el("td", {cls: col.kind === "num" ? "num" : (col.kind === "cat" ? "label-" + String(v) : "")});
      if (col.key === "query_id") td.appendChild(el("a", {href: "#q=" + encodeURIComponent(v), text: v}));
      else td.textContent = fmt(v, col.kind);
      tr.appendChild(td);
    }
    if (row.query_id === state.selected) tr.classList.add("selected");
    return tr;
  }

  // the rows from the first one in view, OVERSCAN more on each side, between two spacers as tall as the rows
  // left out (their height estimated from the rows drawn)
  function visibleRange() {
    const head = table.querySelector("thead").offsetHeight;
    const first = Math.floor(Math.max(0, wrap.scrollTop - head) / state.rowHeight);
    const shown = Math.ceil((wrap.clientHeight || 600) / state.rowHeight);
    return [first, first + shown];
  }

  function drawWindow() {
    const n = state.view.length;
    const [first, last] = visibleRange();
    const start = Math.max(0, Math.min(first, n) - OVERSCAN), end = Math.min(n, last + OVERSCAN);
    const tbody = table.querySelector("tbody");
    const body = document.createDocumentFragment();
    if (start > 0) body.appendChild(spacer(start * state.rowHeight));
    const drawn = [];
    for (let i = start; i < end; i++) drawn.push(body.appendChild(rowElement(state.view[i])));
    if (end < n) body.appendChild(spacer((n - end) * state.rowHeight));
    tbody.textContent = "";
    tbody.appendChild(body);
    state.start = start;
    state.end = end;
    if (drawn.length) {
      const h = drawn.reduce((t, tr) => t + tr.offsetHeight, 0) / drawn.length;
      if (h > 0) state.rowHeight = h;
    }
  }

  let pending = false;
  function onScroll() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const [first, last] = visibleRange();
      const n = state.view.length;
      if ((state.start > 0 && first - OVERSCAN / 2 < state.start) ||
          (state.end < n && last + OVERSCAN / 2 > state.end)) drawWindow();
    });
  }

  function highlighted(text, terms) {
    const span = el("span");
    if (!text) return span;
    if (!terms || !terms.length) { span.textContent = text; return span; }
    const esc = s => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const re = new RegExp("\\b(" + terms.map(esc).join("|") + ")", "gi");
    const parts = text.split(re);
    parts.forEach((part, i) => span.appendChild(i % 2 ? el("mark", {text: part}) : document.createTextNode(part)));
    return span;
  }

  function movement(sys, doc, rank, view) {
    if (sys.role !== "reranked") {
      const p = DATA.primary, r = (view.ranks[p] || {})[doc];
      return r === undefined ? ["→ –", "not in " + p] : ["→ #" + r, "rank in " + p];
    }
    const before = (view.ranks[sys.first_stage] || {})[doc];
    if (before === undefined) return ["new", "not in " + sys.first_stage];
    const d = before - rank;
    const title = sys.first_stage + " #" + before;
    return [d > 0 ? "▲" + d : d < 0 ? "▼" + (-d) : "=", title];
  }

  function showQuery(qid) {
    detail.textContent = "";
    const row = BY_ID.get(qid);
    const view = DATA.views[qid];
    if (!row || !view) {
      detail.appendChild(el("p", {cls: "warn", text: "No query " + qid + " in this report."}));
      return;
    }
    detail.appendChild(el("h3", {id: "detail-title", text: qid + ": " + (row.query || "(no query text)")}));
    detail.appendChild(el("p", {cls: "muted", text: "type " + row.query_type + " · terms highlighted: " +
      (view.terms.length ? view.terms.join(", ") : "none")}));
    const facts = el("table", {id: "detail-values"});
    facts.appendChild(el("thead", {}, [el("tr", {}, DATA.detail_columns.map(c => el("th", {text: c.label})))]));
    const body = el("tbody");
    for (const line of DATA.detail_rows[qid] || []) {
      body.appendChild(el("tr", {}, DATA.detail_columns.map(c =>
        el("td", {cls: c.kind === "num" ? "num" : "", text: fmt(line[c.key], c.kind)}))));
    }
    facts.appendChild(body);
    detail.appendChild(facts);
    const fromJudge = new Set((DATA.judge_labelled || {})[qid] || []);
    const grid = el("div", {cls: "side-by-side"});
    for (const sys of DATA.systems) {
      const top = view.top[sys.name] || [];
      const list = el("div", {cls: "system-list", "data-system": sys.name});
      // a system with repeats: the values above are the mean over its repeats, this list is one repeat's
      list.appendChild(el("b", {text: sys.name + " (" + (sys.role === "reranked" ? "reranked" : "first stage") +
                                       (sys.shown ? ", " + sys.shown : "") + "), top " + DATA.k}));
      const t = el("table");
      t.appendChild(el("thead", {}, [el("tr", {}, ["#", "doc", "grade", sys.role === "reranked" ? "move" : "→",
                                                   "text"].map(h => el("th", {text: h})))]));
      const tb = el("tbody");
      top.forEach(([doc, grade], i) => {
        const [move, title] = movement(sys, doc, i + 1, view);
        const byJudge = grade !== null && fromJudge.has(doc);
        tb.appendChild(el("tr", {"data-doc": doc}, [
          el("td", {cls: "num", text: String(i + 1)}), el("td", {text: doc}),
          el("td", {cls: "grade " + (grade === null ? "unjudged" : grade > 0 ? "relevant" : "nonrelevant") +
                         (byJudge ? " judge" : ""),
                    ...(byJudge ? {title: "grade from the LLM judge, not a human"} : {}),
                    text: grade === null ? "unjudged" : String(grade) + (byJudge ? " (judge)" : "")}),
          el("td", {cls: "move", title: title, text: move}),
          el("td", {cls: "snippet"}, [highlighted(view.snippets[doc], view.terms)])]));
      });
      if (!top.length) tb.appendChild(el("tr", {}, [el("td", {colspan: "5", cls: "muted", text: "no documents"})]));
      t.appendChild(tb);
      list.appendChild(t);
      grid.appendChild(list);
    }
    detail.appendChild(grid);
    const missed = DATA.missed[qid] || [];
    const m = el("div", {id: "detail-missed"}, [el("b", {text: "Best judged documents none of the lists shows"})]);
    if (missed.length) {
      const ul = el("ul");
      for (const x of missed) {
        const where = x.first_stage_rank ? "candidate, " + DATA.primary_first + " #" + x.first_stage_rank
                                         : "not in the candidates";
        const judged = fromJudge.has(x.doc_id) ? " from the judge" : "";
        ul.appendChild(el("li", {"data-doc": x.doc_id}, [x.doc_id + " (grade " + x.grade + judged + ", " + where + ") ",
                                                          highlighted(view.snippets[x.doc_id], view.terms)]));
      }
      m.appendChild(ul);
    } else m.appendChild(el("p", {cls: "muted", text: "none: every relevant judged document is shown"}));
    detail.appendChild(m);
    state.selected = qid;
    for (const tr of table.querySelectorAll("tbody tr[data-qid]")) tr.classList.toggle("selected", tr.dataset.qid === qid);
  }

  function fromHash() {
    const m = location.hash.match(/^#q=(.+)$/);
    if (m) {
      showQuery(decodeURIComponent(m[1]));
      detail.scrollIntoView();
    }
  }

  function start(data) {
    DATA = data;
    BY_ID = new Map(DATA.rows.map(r => [r.query_id, r]));
    buildHead();
    render();
    wrap.addEventListener("scroll", onScroll, {passive: true});
    window.addEventListener("hashchange", fromHash);
    fromHash();
    root.explorerData = DATA;  // what the explorer read, for a test to compare with the report's own
    root.classList.remove("loading");
    root.classList.add("ready");
  }

  function fail(why) {
    root.classList.remove("loading");
    detail.classList.remove("needs-script");
    detail.textContent = "";
    detail.appendChild(el("p", {cls: "warn", text: "The query explorer cannot read its data: " + why +
                                  ". per_query.csv beside this page has every value."}));
  }

  // the plots above decode after this script runs and push the panel down: scroll to it again once loaded
  window.addEventListener("load", () => { if (DATA && location.hash.startsWith("#q=")) detail.scrollIntoView(); });
  const envelope = JSON.parse(document.getElementById("explore-data").textContent);
  if (envelope.encoding === "json") start(decode(envelope.data));  // a small page: at once, as it loads
  else if (envelope.encoding !== "gzip+base64") fail("unknown encoding " + envelope.encoding);
  else if (typeof DecompressionStream === "undefined") fail("this browser has no DecompressionStream (gzip)");
  else {
    root.classList.add("loading");
    gunzip(envelope.data).then(payload => start(decode(payload)), e => fail(String(e)));
  }
})();
