// batchscope inspector: RL data. Token heat-layer toggle, tidy group-filter URLs, and the episode frame scrubber.
// No inline scripts (CSP): everything is wired here; pages render the same state server-side, so links work without it.
"use strict";
(function () {
  // -- token layers: swap the logprob heat for |logprob - ref_logprob| ------------------------
  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    var button = target && target.closest("button[data-rl-layer]");
    if (!button) { return; }
    var scope = button.closest(".rl-tokens");
    if (!scope) { return; }
    var on = scope.classList.toggle("rl-alt");
    button.setAttribute("aria-pressed", on ? "true" : "false");
  });

  // -- group filters: leave empty (default) parameters out of the URL htmx requests and pushes ---
  document.addEventListener("htmx:configRequest", function (event) {
    var source = event.detail && event.detail.elt;
    if (!source || !source.closest || !source.closest("form.rl-controls")) { return; }
    var data = event.detail.formData;
    var params = event.detail.parameters;
    var empty = [];
    if (data && data.forEach) {
      data.forEach(function (value, key) { if (value === "") { empty.push(key); } });
      empty.forEach(function (key) { data.delete(key); });
    }
    if (params) { empty.forEach(function (key) { try { delete params[key]; } catch (e) { /* read-only in some versions */ } }); }
  });

  // -- episodes: the scrubber moves the frame, the chart cursors, the readout and ?t= ----------
  function withT(href, t) {
    var url = new URL(href, window.location.href);
    url.searchParams.set("t", String(t));
    return url.pathname + url.search + url.hash;
  }

  function moveCursor(svg, t) {
    var line = svg.querySelector(".chart-cursor");
    if (!line) { return; }
    var x0 = parseFloat(svg.dataset.x0), x1 = parseFloat(svg.dataset.x1);
    var p0 = parseFloat(svg.dataset.px0), p1 = parseFloat(svg.dataset.px1);
    var clamped = Math.min(Math.max(t, x0), x1);
    var x = x1 === x0 ? (p0 + p1) / 2 : p0 + (clamped - x0) * (p1 - p0) / (x1 - x0);
    line.setAttribute("x1", x.toFixed(2));
    line.setAttribute("x2", x.toFixed(2));
  }

  function setText(id, value) {
    var element = document.getElementById(id);
    if (element) { element.textContent = value; }
  }

  function cellText(row, name) {
    var cell = row ? row.querySelector("." + name) : null;
    return cell ? cell.textContent : "—";
  }

  function setLink(link, href) {
    if (!link) { return; }
    if (href) {
      link.setAttribute("href", href);
      link.classList.remove("off");
    } else {
      link.removeAttribute("href");
      link.classList.add("off");
    }
  }

  function Episode(root) {
    this.root = root;
    this.length = parseInt(root.dataset.length, 10) || 0;
    this.slider = root.querySelector("#rl-scrubber");
    this.frame = root.querySelector("#rl-frame");
    this.missing = root.querySelector("#rl-no-frame");
  }

  Episode.prototype.show = function (t) {
    var root = this.root;
    if (this.length < 1) { return; }
    t = Math.max(0, Math.min(this.length - 1, Math.round(t)));
    if (isNaN(t)) { return; }
    var row = root.querySelector('tr[data-t="' + t + '"]');
    var hasFrame = row ? row.dataset.frame === "1" : true;
    if (hasFrame) {
      this.frame.src = withT(root.dataset.frameBase, t);
      this.frame.alt = "observation before the action of step " + t;
      this.frame.hidden = false;
      if (this.missing) { this.missing.hidden = true; }
    } else {
      this.frame.removeAttribute("src");
      this.frame.hidden = true;
      if (this.missing) { this.missing.hidden = false; }
    }
    root.dataset.t = String(t);
    if (this.slider && this.slider.value !== String(t)) { this.slider.value = String(t); }
    setText("rl-t", String(t));
    setText("rl-action", cellText(row, "rl-action"));
    setText("rl-reward", cellText(row, "rl-reward"));
    setText("rl-return", cellText(row, "rl-return"));
    setText("rl-done", cellText(row, "rl-done"));
    Array.prototype.forEach.call(root.querySelectorAll("tr.current"), function (r) { r.classList.remove("current"); });
    if (row) { row.classList.add("current"); }
    Array.prototype.forEach.call(root.querySelectorAll("svg.chart[data-x0]"), function (svg) { moveCursor(svg, t); });
    var here = withT(window.location.href, t);
    setLink(document.getElementById("rl-prev"), t > 0 ? withT(here, t - 1) : null);
    setLink(document.getElementById("rl-next"), t < this.length - 1 ? withT(here, t + 1) : null);
    Array.prototype.forEach.call(document.querySelectorAll("[data-rl-copy]"), function (b) { b.dataset.copy = here; });
    document.title = document.title.replace(/t=\d+/, "t=" + t);
    window.history.replaceState(window.history.state, "", here);
    if (t + 1 < this.length) { (new Image()).src = withT(root.dataset.frameBase, t + 1); }
  };

  function current(root) { return parseInt(root.dataset.t, 10) || 0; }

  function wire(root) {
    if (root.dataset.rlWired) { return; }
    root.dataset.rlWired = "1";
    var episode = new Episode(root);
    if (episode.slider) {
      episode.slider.addEventListener("input", function () { episode.show(parseInt(episode.slider.value, 10)); });
    }
    root.addEventListener("click", function (event) {
      var target = event.target instanceof Element ? event.target : null;
      var link = target && target.closest("a");
      if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) { return; }
      var t = null;
      if (link.id === "rl-prev") { t = current(root) - 1; }
      else if (link.id === "rl-next") { t = current(root) + 1; }
      else if (link.hasAttribute("data-x")) { t = parseInt(link.getAttribute("data-x"), 10); }
      else if (link.closest(".rl-steps")) { t = parseInt(link.textContent, 10); }
      if (t === null || isNaN(t)) { return; }
      event.preventDefault();
      episode.show(t);
    });
  }

  function wireAll() {
    Array.prototype.forEach.call(document.querySelectorAll("section.rl-episode[data-frame-base]"), wire);
  }

  document.addEventListener("DOMContentLoaded", wireAll);
  document.addEventListener("htmx:load", wireAll);
})();
