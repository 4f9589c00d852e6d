// kcheck explorer: renders the session the server keeps (checker/explorer.py). No library, no
// network beyond this page's own server on 127.0.0.1.
"use strict";
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

async function call(path, body) {
  const r = await fetch(path, body === undefined ? {} :
    {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const v = await r.json();
  if (!r.ok) { $("error").textContent = v.error; return; }
  $("error").textContent = "";
  render(v);
}

const fmt = (v) => v === true ? "true" : v === false ? "false" : String(v);

function render(v) {
  document.title = `kcheck explorer: ${v.spec}/${v.variant}`;
  $("title").textContent = `kcheck explorer: ${v.spec}`;
  const params = Object.entries(v.parameters).map(([k, x]) => `${k}=${x}`).join(", ") || "none";
  $("meta").textContent = `variant ${v.variant}; parameters ${params}; ${v.path.length} step(s) taken`;
  const sel = $("variant");
  sel.replaceChildren(...v.variants.map((n) => { const o = el("option", {value: n}, n); if (n === v.variant) o.selected = true; return o; }));
  const ini = $("initial");
  if (ini.options.length !== v.initial_states)
    ini.replaceChildren(...Array.from({length: v.initial_states}, (_, i) => el("option", {value: i}, `#${i}`)));

  $("state").tBodies[0].replaceChildren(...v.state.map((f) =>
    el("tr", {"data-field": f.field},
      el("td", {}, f.field),
      el("td", {class: f.changed ? "changed value" : "value"}, fmt(f.value)),
      el("td", {}, f.changed ? fmt(f.before) : ""))));

  const violated = v.properties.filter((p) => !p.holds);
  $("violations").className = "violations " + (violated.length ? "violated" : "holds");
  $("violations").replaceChildren(violated.length
    ? el("div", {},
        el("h2", {}, `Violated in this state: ${violated.length} of ${v.properties.length} properties`),
        el("ul", {}, ...violated.map((p) =>
          el("li", {"data-property": p.name}, el("b", {}, p.name + (p.lemma ? " (lemma)" : "")), ": " + p.doc))))
    : el("p", {}, `Every one of the ${v.properties.length} properties holds in this state.`));

  // the violated properties first: the table below repeats them with the rest
  const ordered = [...violated, ...v.properties.filter((p) => p.holds)];
  $("properties").tBodies[0].replaceChildren(...ordered.map((p) =>
    el("tr", {"data-property": p.name},
      el("td", {}, p.name + (p.lemma ? " (lemma)" : "")),
      el("td", {class: "verdict " + (p.holds ? "holds" : "violated")}, p.holds ? "holds" : "VIOLATED"),
      el("td", {}, p.doc))));

  const guard = (a) => a.guard.map((g) => (g.holds ? "✓ " : "✗ ") + g.text).join("\n");
  const enabled = v.actions.filter((a) => a.enabled);
  $("enabled").tBodies[0].replaceChildren(...enabled.map((a) =>
    el("tr", {"data-instance": a.index, title: a.doc},
      el("td", {}, a.within_bounds
        ? el("button", {class: "take", "data-label": a.label, onclick: () => call("/api/step", {instance: a.index})}, "take")
        : el("span", {title: "this step leaves a search bound"}, "beyond bound")),
      el("td", {}, a.label),
      el("td", {class: "guard"}, a.guard.length ? el("pre", {}, guard(a)) : "always enabled"))));
  const disabled = v.actions.filter((a) => !a.enabled);
  $("ndisabled").textContent = disabled.length;
  $("disabled").tBodies[0].replaceChildren(...disabled.map((a) =>
    el("tr", {"data-instance": a.index, class: "disabled", title: a.doc},
      el("td", {}, a.label),
      el("td", {class: "guard"}, el("pre", {}, guard(a))))));

  $("path").replaceChildren(...v.path.map((s, i) =>
    el("li", {class: i === v.path.length - 1 ? "current" : ""}, s.label + (s.outcome !== null ? ` → ${s.outcome}` : ""))));
  const t = v.trace;
  $("trace-box").hidden = !t;
  $("next").disabled = !t || t.position === null || t.position >= t.steps.length;
  if (t) {
    $("trace-name").textContent = t.name + (t.position === null ? " (the path has left it)" : ` (step ${t.position} of ${t.steps.length})`);
    $("trace").replaceChildren(...t.steps.map((s, i) =>
      el("li", {class: t.position !== null && i === t.position - 1 ? "current" : ""}, s)));
  }
}

$("undo").addEventListener("click", () => call("/api/undo", {}));
$("reset").addEventListener("click", () => call("/api/reset", {initial: Number($("initial").value || 0)}));
$("next").addEventListener("click", () => call("/api/next", {}));
$("variant").addEventListener("change", (e) => call("/api/variant", {variant: e.target.value}));
$("file").addEventListener("change", async (e) => {
  const f = e.target.files[0];
  if (!f) return;
  let doc;
  try { doc = JSON.parse(await f.text()); } catch (err) { $("error").textContent = `${f.name} is not JSON`; return; }
  call("/api/load", {trace: doc, name: f.name});
});
call("/api/view");
