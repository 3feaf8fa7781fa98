// batchscope run page: zoom (wheel), pan (drag) and hover read-outs on the metric charts.
// The server draws every chart; this script only asks it for another step range (the #metrics block of the same
// page with ?from=&to=) and keeps the address bar in step, so a copied URL shows the same view. Without it the
// page works as is: the controls form and the zoom/pan links do the same through plain GETs.
"use strict";
(function () {
  var ZOOM = 0.8;  // one wheel notch keeps 80% of the range (or widens it by 1/0.8)
  var DRAG = 4;    // pixels a press must move before it pans instead of clicking a point

  function section() { return document.getElementById("metrics"); }

  function range(metrics) {
    var last = Number(metrics.dataset.last);
    var from = metrics.dataset.from !== undefined ? Number(metrics.dataset.from) : 0;
    var to = metrics.dataset.to !== undefined ? Number(metrics.dataset.to) : last;
    return { from: from, to: to, last: last };
  }

  // Step under a client x coordinate, from the domain the server wrote on the <svg>.
  function stepAt(svg, clientX) {
    var box = svg.getBoundingClientRect();
    var view = svg.viewBox.baseVal;
    var px = (clientX - box.left) * (view.width / box.width);
    var x0 = Number(svg.dataset.x0), x1 = Number(svg.dataset.x1);
    var px0 = Number(svg.dataset.px0), px1 = Number(svg.dataset.px1);
    return x0 + (px - px0) * (x1 - x0) / (px1 - px0);
  }

  function stepsPerPixel(svg) {
    var box = svg.getBoundingClientRect();
    var view = svg.viewBox.baseVal;
    var x0 = Number(svg.dataset.x0), x1 = Number(svg.dataset.x1);
    var px0 = Number(svg.dataset.px0), px1 = Number(svg.dataset.px1);
    return (x1 - x0) / (px1 - px0) * (view.width / box.width);
  }

  var pending = null;

  function load(from, to) {
    var metrics = section();
    if (!metrics) { return; }
    var r = range(metrics);
    from = Math.max(0, Math.round(from));
    to = Math.min(r.last, Math.round(to));
    if (to - from < 2) { return; }
    var whole = from <= 0 && to >= r.last;
    var url = new URL(metrics.dataset.fragment, window.location.href);
    var page = new URL(window.location.href);
    ["from", "to"].forEach(function (name) { url.searchParams.delete(name); page.searchParams.delete(name); });
    if (!whole) {
      url.searchParams.set("from", from); url.searchParams.set("to", to);
      page.searchParams.set("from", from); page.searchParams.set("to", to);
    }
    if (pending) { pending.abort(); }
    pending = new AbortController();
    metrics.classList.add("loading");
    fetch(url.href, { headers: { "HX-Request": "true" }, signal: pending.signal }).then(function (response) {
      if (!response.ok) { throw new Error("HTTP " + response.status); }
      return response.text();
    }).then(function (html) {
      // Our own server's block, parsed inert (DOMParser runs no script) and moved into the page.
      var parsed = new DOMParser().parseFromString(html, "text/html");
      var fresh = parsed.querySelector("#metrics");
      if (fresh) {
        section().replaceWith(document.adoptNode(fresh));
        window.history.replaceState(window.history.state, "", page.href);
      }
    }).catch(function (error) {
      if (error.name !== "AbortError") { metrics.classList.remove("loading"); }
    });
  }

  document.addEventListener("wheel", function (event) {
    var svg = event.target instanceof Element ? event.target.closest(".chart.zoomable svg") : null;
    var metrics = section();
    if (!svg || !metrics) { return; }
    event.preventDefault();
    var r = range(metrics);
    var at = Math.min(r.to, Math.max(r.from, stepAt(svg, event.clientX)));
    var factor = event.deltaY < 0 ? ZOOM : 1 / ZOOM;
    load(at - (at - r.from) * factor, at + (r.to - at) * factor);
  }, { passive: false });

  var drag = null;
  document.addEventListener("mousedown", function (event) {
    var svg = event.target instanceof Element ? event.target.closest(".chart.zoomable svg") : null;
    if (!svg || event.button !== 0) { return; }
    drag = { svg: svg, x: event.clientX, moved: false };
    event.preventDefault();  // no text selection or native link drag while panning
  });
  document.addEventListener("mousemove", function (event) {
    if (drag && Math.abs(event.clientX - drag.x) > DRAG) { drag.moved = true; drag.svg.classList.add("panning"); }
  });
  document.addEventListener("mouseup", function (event) {
    if (!drag) { return; }
    var done = drag;
    drag = null;
    done.svg.classList.remove("panning");
    if (!done.moved) { return; }
    var metrics = section();
    var r = range(metrics);
    var shift = (done.x - event.clientX) * stepsPerPixel(done.svg);
    var span = r.to - r.from;
    var from = Math.min(Math.max(0, r.from + shift), r.last - span);
    load(from, from + span);
    done.svg.dataset.dragged = "1";
  });
  // A drag ends with a click on whatever point is under the pointer: swallow it.
  document.addEventListener("click", function (event) {
    var svg = event.target instanceof Element ? event.target.closest(".chart.zoomable svg") : null;
    if (svg && svg.dataset.dragged) { delete svg.dataset.dragged; event.preventDefault(); }
  }, true);

  // Hover read-out: the point's label (step, value, smoothed value) under the chart.
  document.addEventListener("mouseover", function (event) {
    var point = event.target instanceof Element ? event.target.closest(".chart.zoomable a[data-label]") : null;
    if (!point) { return; }
    var readout = point.closest("figure").querySelector(".chart-readout");
    if (readout) { readout.textContent = point.dataset.label; }
  });
})();
