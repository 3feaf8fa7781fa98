// batchscope inspector: the video scrubber (frame image + ?frame= kept in the URL) and inline errors for media that fail to load.
// Wired by event delegation, so htmx-swapped content works too; the pages work without it (links and a GET form).
"use strict";
(function () {
  // -- scrubber ------------------------------------------------------------
  function frameUrl(view, index) {
    var url = new URL(view.dataset.frameBase, window.location.href);
    url.searchParams.set("frame", String(index));
    return url.pathname + url.search;
  }

  function linkUrl(view, index) {
    var form = view.querySelector("form.scrubber");
    var url = new URL(view.dataset.linkBase, window.location.href);
    if (form) {
      form.querySelectorAll("input[type=hidden]").forEach(function (input) { url.searchParams.set(input.name, input.value); });
    }
    url.searchParams.set("frame", String(index));
    return url.pathname + url.search;
  }

  var pending = new WeakMap();

  function show(view, index) {
    var count = parseInt(view.dataset.count, 10) || 0;
    var fps = parseFloat(view.dataset.fps) || 0;
    index = Math.max(0, Math.min(count - 1, index));
    var img = view.querySelector("img.frame");
    var range = view.querySelector("form.scrubber input[type=range]");
    if (range && String(range.value) !== String(index)) { range.value = String(index); }
    var out = view.querySelector("output.frame-index");
    if (out) { out.textContent = String(index); }
    var time = view.querySelector("output.frame-time");
    if (time && fps > 0) { time.textContent = (index / fps).toFixed(3); }
    var link = linkUrl(view, index);
    var anchor = view.querySelector("a.frame-link");
    if (anchor) { anchor.setAttribute("href", link); }
    view.querySelectorAll(".filmstrip li").forEach(function (li) {
      var a = li.querySelector("a[data-frame]");
      li.classList.toggle("current", !!a && a.dataset.frame === String(index));
    });
    if (view.dataset.page === "true") {
      window.history.replaceState(window.history.state, "", link + window.location.hash);
      document.querySelectorAll(".current-frame").forEach(function (el) { el.textContent = String(index); });
      document.querySelectorAll("button.copy-link[data-copy]").forEach(function (b) { b.dataset.copy = link; });
    }
    if (img) {
      // keep the frame on screen until the next one has loaded (no flicker while scrubbing)
      clearTimeout(pending.get(view));
      pending.set(view, setTimeout(function () {
        var src = frameUrl(view, index);
        var next = new Image();
        next.onload = function () {
          if (img.dataset.want === String(index)) { img.src = src; img.dataset.frame = String(index); clearError(img); }
        };
        next.onerror = function () { if (img.dataset.want === String(index)) { img.src = src; } };
        img.dataset.want = String(index);
        next.src = src;
      }, 40));
    }
  }

  document.addEventListener("input", function (event) {
    var range = event.target instanceof Element ? event.target.closest("form.scrubber input[type=range]") : null;
    if (!range) { return; }
    var view = range.closest(".video-view[data-frame-base]");
    if (view) { show(view, parseInt(range.value, 10)); }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target instanceof Element ? event.target.closest("form.scrubber") : null;
    var view = form ? form.closest(".video-view[data-frame-base]") : null;
    if (!view) { return; }
    event.preventDefault();
    show(view, parseInt(form.querySelector("input[type=range]").value, 10));
  });

  document.addEventListener("click", function (event) {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) { return; }
    var a = event.target instanceof Element ? event.target.closest(".video-view .filmstrip a[data-frame]") : null;
    var view = a ? a.closest(".video-view[data-frame-base]") : null;
    if (!view) { return; }
    event.preventDefault();
    show(view, parseInt(a.dataset.frame, 10));
  });

  // -- media that fails to load: show the server's message in its place ------
  function clearError(img) {
    var next = img.nextElementSibling;
    if (next && next.classList.contains("media-error")) { next.remove(); }
  }

  function showError(img, message) {
    clearError(img);
    var box = document.createElement("span");
    box.className = "error-inline media-error";
    box.setAttribute("role", "alert");
    box.textContent = message;
    img.insertAdjacentElement("afterend", box);
    img.classList.add("media-broken");
  }

  document.addEventListener("error", function (event) {
    var img = event.target;
    if (!(img instanceof HTMLImageElement) || !img.hasAttribute("data-media")) { return; }
    var src = img.currentSrc || img.src;
    if (!src || img.dataset.failed === src) { return; }
    img.dataset.failed = src;
    fetch(src, { headers: { "HX-Request": "true" }, credentials: "same-origin" }).then(function (response) {
      if (response.ok) { return null; }
      return response.text().then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var message = doc.querySelector(".message");
        return (message ? message.textContent : "") || ("error " + response.status + " loading " + img.alt);
      });
    }, function () { return "cannot load " + img.alt; }).then(function (message) {
      if (message) { showError(img, message); }
    });
  }, true);
})();
