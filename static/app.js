// batchscope inspector: copy-link buttons, display toggles and keyboard navigation.
// No inline scripts anywhere: everything is wired here by event delegation, so htmx-swapped content works too.
"use strict";
(function () {
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "offscreen";
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand("copy");
      document.body.removeChild(area);
      if (ok) { resolve(); } else { reject(new Error("copy refused")); }
    });
  }

  // data-copy holds one URL; it is copied absolute, and nothing else is.
  function copyLink(button) {
    var url = new URL(button.dataset.copy, window.location.href).href;
    var label = button.textContent;
    copyText(url).then(function () {
      button.textContent = "copied ✓";
      button.dataset.copied = url;
    }, function () {
      button.textContent = "copy failed";
    }).finally(function () {
      window.setTimeout(function () { button.textContent = label; }, 1500);
    });
  }

  function toggle(button) {
    var name = button.dataset.toggle;
    var scope = button.closest(".field") || document.body;
    var on = scope.classList.toggle(name);
    button.setAttribute("aria-pressed", on ? "true" : "false");
  }

  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    if (!target) { return; }
    var copy = target.closest("button.copy-link[data-copy]");
    if (copy) { copyLink(copy); return; }
    var tog = target.closest("button[data-toggle]");
    if (tog) { toggle(tog); }
  });

  // -- keyboard ------------------------------------------------------------
  function samples() { return Array.prototype.slice.call(document.querySelectorAll(".sample[id]")); }

  function current(list) {
    var active = document.activeElement && document.activeElement.closest ? document.activeElement.closest(".sample[id]") : null;
    if (active) { return list.indexOf(active); }
    var hash = decodeURIComponent(window.location.hash.slice(1));
    for (var i = 0; i < list.length; i++) { if (list[i].id === hash) { return i; } }
    return -1;
  }

  function focusSample(element) {
    samples().forEach(function (s) { s.classList.remove("focused"); });
    if (!element.hasAttribute("tabindex")) { element.setAttribute("tabindex", "-1"); }
    element.classList.add("focused");
    element.focus({ preventScroll: true });
    element.scrollIntoView({ block: "nearest" });
    window.history.replaceState(window.history.state, "", "#" + element.id);
  }

  function move(step) {
    var list = samples();
    if (!list.length) { return; }
    var index = current(list);
    var next = index < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(list.length - 1, Math.max(0, index + step));
    focusSample(list[next]);
  }

  function follow(rel) {
    var link = document.querySelector("a[rel~=" + rel + "]");
    if (link) { link.click(); }
  }

  function typing(element) {
    if (!element) { return false; }
    var tag = element.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || element.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(document.activeElement)) { return; }
    var picker;
    switch (event.key) {
      case "j": move(1); break;
      case "k": move(-1); break;
      case "[": follow("prev"); break;
      case "]": follow("next"); break;
      case "r":
        picker = document.querySelector("#rank-picker, [data-rank-picker]");
        if (!picker) { return; }
        picker.focus();
        break;
      default: return;
    }
    event.preventDefault();
  });

  function focusFromHash() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var element = id ? document.getElementById(id) : null;
    if (element && element.classList.contains("sample")) { focusSample(element); }
  }

  document.addEventListener("DOMContentLoaded", focusFromHash);
  window.addEventListener("hashchange", focusFromHash);
})();
