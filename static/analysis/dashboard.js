// The analysts' dashboard: while a newer analysis is being computed on the workers, ask the server every few
// seconds whether it is in, then say so in the status line (a polite live region) and offer the refresh link.
// No inline script and no meta refresh: the page works without JavaScript (the Refresh link is always there).
(function () {
  "use strict";
  var POLL_MS = 3000;
  var GIVE_UP_MS = 15 * 60 * 1000;

  function start() {
    var status = document.getElementById("analysis-status");
    if (!status || status.getAttribute("data-computing") !== "true" || !window.fetch) return;
    var url = status.getAttribute("data-status-url");
    var text = status.querySelector(".status-text");
    var link = status.querySelector(".status-refresh");
    var started = Date.now();

    function done(message) {
      text.textContent = message;
      link.textContent = "Show the new results";
      status.classList.remove("status-computing");
      status.classList.add("status-ready");
    }

    function poll() {
      if (Date.now() - started > GIVE_UP_MS) return;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("status " + response.status);
          return response.json();
        })
        .then(function (state) {
          if (state.current) {
            done("New results are ready (computed at " + new Date(state.computed_at).toLocaleString() + ").");
          } else {
            window.setTimeout(poll, POLL_MS);
          }
        })
        .catch(function () {
          window.setTimeout(poll, POLL_MS * 3);
        });
    }

    window.setTimeout(poll, POLL_MS);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
