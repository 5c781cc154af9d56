// The responder console without a refresh: every few seconds, the queue count and each held reply's seconds
// left from status.json; the page reloads when a reply arrives and nothing is held, or when a held reply is no
// longer the responder's to answer (sent elsewhere, given to the fallback). Drafts being typed are never lost:
// no reload while a textarea has text.
(function () {
  "use strict";
  var root = document.getElementById("console");
  if (!root) return;
  var url = root.getAttribute("data-status");
  var held = (root.getAttribute("data-held") || "").split(",").filter(Boolean);
  var count = document.getElementById("queue-count");
  function typing() {
    var areas = document.querySelectorAll("textarea");
    for (var i = 0; i < areas.length; i++) if (areas[i].value.trim()) return true;
    return false;
  }
  function tick() {
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (s) {
        if (!s) return;
        var n = s.waiting;
        count.textContent = n + " conversation" + (n === 1 ? "" : "s") + " waiting for a person.";
        var gone = false;
        held.forEach(function (id) {
          var el = document.getElementById("time-left-" + id);
          if (!(id in s.held)) gone = true;
          else if (el) el.textContent = s.held[id];
        });
        if ((gone && !typing()) || (held.length === 0 && n > 0 && !root.dataset.announced)) {
          if (gone) { window.location.reload(); return; }
          root.dataset.announced = "1";
        }
      })
      .catch(function () {});
  }
  setInterval(tick, 3000);
})();
