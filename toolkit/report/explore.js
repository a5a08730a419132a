// The diagnosis page's query explorer: a per-query table that sorts and filters, and for the query in the
// address (#q=<id>) every system's top k side by side. Reads the JSON in <script id="explore-data">; needs no
// network and no library. Written by toolkit/report/diagnosis.py.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("explore-data").textContent);
  const table = document.getElementById("explore-table");
  const count = document.getElementById("explore-count");
  const detail = document.getElementById("query-detail");
  const state = {sort: null, desc: false, filters: {}};

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

  function compare(a, b) {
    const col = DATA.columns.find(c => c.key === state.sort);
    let x = a[state.sort], y = b[state.sort];
    const missing = v => v === null || v === undefined || (typeof v === "number" && isNaN(v));
    if (missing(x) && missing(y)) return a.query_id < b.query_id ? -1 : 1;
    if (missing(x)) return 1;  // missing values last in either direction
    if (missing(y)) return -1;
    let c = col.kind === "num" ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
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

  function render() {
    const tbody = table.querySelector("tbody");
    tbody.textContent = "";
    let rows = DATA.rows.filter(passes);
    if (state.sort) rows = rows.slice().sort(compare);
    for (const th of table.querySelectorAll("thead th[data-key]")) {
      const on = th.dataset.key === state.sort;
      th.setAttribute("aria-sort", on ? (state.desc ? "descending" : "ascending") : "none");
    }
    for (const row of rows) {
      const tr = el("tr", {"data-qid": row.query_id});
      for (const col of DATA.columns) {
        const v = row[col.key];
        const td = el("td", {cls: col.kind === "num" ? "num" : (col.kind === "cat" ? "label-" + String(v) : "")});
        if (col.key === "query_id") td.appendChild(el("a", {href: "#q=" + encodeURIComponent(v), text: v}));
        else td.textContent = fmt(v, col.kind);
        tr.appendChild(td);
      }
      tbody.appendChild(tr);
    }
    count.textContent = rows.length + " of " + DATA.rows.length + " queries shown";
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
    const row = DATA.rows.find(r => r.query_id === qid);
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
    for (const tr of table.querySelectorAll("tbody tr")) tr.classList.toggle("selected", tr.dataset.qid === qid);
  }

  function fromHash() {
    const m = location.hash.match(/^#q=(.+)$/);
    if (m) {
      showQuery(decodeURIComponent(m[1]));
      detail.scrollIntoView();
    }
  }

  buildHead();
  render();
  window.addEventListener("hashchange", fromHash);
  fromHash();
  // the plots above decode after this script runs and push the panel down: scroll to it again once loaded
  window.addEventListener("load", () => { if (location.hash.startsWith("#q=")) detail.scrollIntoView(); });
  document.getElementById("explore").classList.add("ready");
})();
