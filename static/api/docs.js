/* Keyboard access in Swagger UI: the code samples it shows when an operation is opened scroll sideways, so each
   becomes focusable (a named region), as axe-core asks; they are added as the page changes. */
(function () {
  "use strict";
  function reachable(root) {
    root.querySelectorAll("pre.example, pre.microlight, .highlight-code pre, .model-box").forEach(function (el) {
      if (!el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        if (el.tagName === "PRE") {
          el.setAttribute("role", "region");
          el.setAttribute("aria-label", "Example");
        }
      }
    });
  }
  var ui = document.getElementById("swagger-ui");
  if (!ui || !window.MutationObserver) { return; }
  new MutationObserver(function () { reachable(ui); }).observe(ui, { childList: true, subtree: true });
  reachable(ui);
})();
