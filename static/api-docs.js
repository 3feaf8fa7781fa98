// Starts the vendored Swagger UI on /api/docs (kept out of the page so the CSP needs no inline script).
"use strict";
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({ url: root.dataset.openapiUrl, dom_id: "#swagger-ui", deepLinking: true });
});
