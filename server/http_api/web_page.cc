#include "server/http_api/web_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "text/inline_tags.h"

namespace glossa::server {
namespace {

// Behaviour worth knowing: a translation starts 300 ms after the last keystroke and a newer one
// aborts the older (AbortController), so answers never arrive out of order; a fragment such as
// #source=es&target=en&q=Hola fills the form (links, and the browser test); an API key typed
// in is sent as api_key when the server requires one.
constexpr absl::string_view kIntroductionMark = "<!--introduction-->";
constexpr absl::string_view kWebPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Glossa</title>
<style>
  body { font: 16px/1.4 system-ui, sans-serif; margin: 0; background: #f5f5f2; color: #222; }
  header { padding: 12px 24px; background: #23395d; color: #fff; }
  header h1 { margin: 0; font-size: 20px; font-weight: 600; }
  main { max-width: 1100px; margin: 20px auto; padding: 0 16px; }
  .bar { display: flex; gap: 12px; align-items: center; margin-bottom: 10px; flex-wrap: wrap; }
  .panes { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
  textarea { width: 100%; box-sizing: border-box; min-height: 260px; padding: 10px;
             font: inherit; border: 1px solid #bbb; border-radius: 6px; resize: vertical; }
  #output { background: #fff; }
  select, button, input { font: inherit; padding: 4px 8px; }
  #status { color: #666; font-size: 14px; min-height: 1.4em; }
  #status.error { color: #b00020; }
  #about { margin: 0 0 14px; color: #444; }
  #about button { margin: 4px 6px 0 0; }
  @media (max-width: 700px) { .panes { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<header><h1>Glossa</h1></header>
<main>
  <!--introduction-->
  <div class="bar">
    <label>From <select id="source" aria-label="Source language"></select></label>
    <label>To <select id="target" aria-label="Target language"></select></label>
    <label>API key <input id="apikey" type="password" size="12" autocomplete="off"></label>
    <button id="copy" type="button">Copy translation</button>
  </div>
  <div class="panes">
    <textarea id="input" placeholder="Type or paste text to translate" autofocus></textarea>
    <textarea id="output" readonly placeholder="Translation" aria-live="polite"></textarea>
  </div>
  <p id="status"></p>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let languages = [];
let timer = null;
let inflight = null;

function status(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function fillTargets() {
  const source = languages.find((l) => l.code === $("source").value);
  const keep = $("target").value;
  $("target").replaceChildren();
  for (const code of (source ? source.targets : [])) {
    const name = (languages.find((l) => l.code === code) || {name: code}).name;
    $("target").add(new Option(name, code));
  }
  if ([...$("target").options].some((o) => o.value === keep)) $("target").value = keep;
}

async function translate() {
  const q = $("input").value;
  if (inflight) inflight.abort();
  if (!q.trim()) { $("output").value = ""; status(""); return; }
  inflight = new AbortController();
  const body = {q, source: $("source").value, target: $("target").value, format: "text"};
  if ($("apikey").value) body.api_key = $("apikey").value;
  status("Translating…");
  const started = performance.now();
  try {
    const response = await fetch("translate", {
      method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify(body), signal: inflight.signal});
    const answer = await response.json();
    if (!response.ok) { status(answer.error || response.statusText, true); return; }
    $("output").value = answer.translatedText;
    status("Translated in " + Math.round(performance.now() - started) + " ms");
  } catch (e) {
    if (e.name !== "AbortError") status("Cannot reach the server: " + e.message, true);
  }
}

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(translate, 300);
}

async function start() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  try {
    languages = await (await fetch("languages")).json();
  } catch (e) {
    status("Cannot load the languages: " + e.message, true);
    return;
  }
  for (const l of languages.filter((l) => l.targets.length)) {
    $("source").add(new Option(l.name, l.code));
  }
  if (fragment.get("source")) $("source").value = fragment.get("source");
  fillTargets();
  if (fragment.get("target")) $("target").value = fragment.get("target");
  if (fragment.get("q")) { $("input").value = fragment.get("q"); translate(); }
  document.body.dataset.ready = "1";
}

for (const example of document.querySelectorAll("button.example")) {
  example.addEventListener("click", () => { $("input").value = example.textContent; translate(); });
}
$("input").addEventListener("input", schedule);
$("source").addEventListener("change", () => { fillTargets(); translate(); });
$("target").addEventListener("change", translate);
$("copy").addEventListener("click", async () => {
  try {
    await navigator.clipboard.writeText($("output").value);
    status("Copied");
  } catch (e) {
    $("output").select();
    status(document.execCommand("copy") ? "Copied" : "Select the text and copy it", false);
  }
});
start();
</script>
</body>
</html>
)html";

}  // namespace

std::string WebPage(absl::string_view about, const std::vector<std::string>& examples) {
  std::string introduction;
  if (!about.empty()) {
    introduction = absl::StrCat("<section id=\"about\"><p>", EscapeXmlText(about), "</p>");
    if (!examples.empty()) absl::StrAppend(&introduction, "<p>Try:<br>");
    for (const std::string& example : examples) {
      absl::StrAppend(&introduction, "<button type=\"button\" class=\"example\">",
                      EscapeXmlText(example), "</button>");
    }
    absl::StrAppend(&introduction, examples.empty() ? "" : "</p>", "</section>");
  }
  return absl::StrReplaceAll(kWebPage, {{kIntroductionMark, introduction}});
}

}  // namespace glossa::server
