// batchscope live pages: while a run trains, follow it without reloading.
// The page's #live-marker names a small JSON page (how far the run has got, and a version that changes whenever its
// ledger grows). This script polls it; when the version moves it asks the server for the same page as a fragment
// (the request htmx makes, so the URL — with any chart zoom in it — is kept) and swaps every element marked
// data-live-swap for the fresh one with the same id. Without JavaScript the page is a plain page of the moment it
// was loaded.
"use strict";
(function () {
  var timer = null;
  var busy = false;

  function marker() { return document.getElementById("live-marker"); }

  function schedule() {
    var m = marker();
    if (!m || m.dataset.final !== undefined) { return; }  // complete, or a run nothing moves on
    clearTimeout(timer);
    timer = setTimeout(poll, Number(m.dataset.poll) || 1000);
  }

  function swap(html) {
    // Our own server's answer, parsed inert (DOMParser runs no script), its live parts moved into the page.
    var parsed = new DOMParser().parseFromString(html, "text/html");
    parsed.querySelectorAll("[data-live-swap][id]").forEach(function (fresh) {
      if (fresh.parentElement && fresh.parentElement.closest("[data-live-swap]")) { return; }  // moves with its container
      var old = document.getElementById(fresh.id);
      if (old) { old.replaceWith(document.adoptNode(fresh)); }
    });
    document.dispatchEvent(new CustomEvent("batchscope:live"));
  }

  function refresh() {
    return fetch(window.location.href, { headers: { "HX-Request": "true" } }).then(function (response) {
      return response.ok ? response.text() : null;
    }).then(function (html) { if (html) { swap(html); } });
  }

  function poll() {
    var m = marker();
    if (!m || busy) { schedule(); return; }
    busy = true;
    fetch(m.dataset.live, { headers: { "Accept": "application/json" } }).then(function (response) {
      return response.ok ? response.json() : null;
    }).then(function (now) {
      var current = marker();
      if (now && current && now.version !== current.dataset.version) { return refresh(); }
      return null;
    }).catch(function () { return null; }).then(function () { busy = false; schedule(); });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", schedule);
  } else {
    schedule();
  }
})();
