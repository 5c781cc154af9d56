// The one poller of the analysts' pages that wait on a worker (the dashboard and the judge report while a newer
// analysis is computed, an export file's page while its file is prepared). Loaded before the page's own script,
// which says what to ask for and what "ready" means:
//   analysisPoll.whenLoaded(function () {
//     analysisPoll.until({url: ..., json: true, ready: function (answer) {...}, done: function (answer) {...},
//                         giveUpMs: ...});
//   });
// It asks every 3 s (three times as long after a failed request) until `ready(answer)` is true, then calls
// `done(answer)` once; it stops asking after `giveUpMs`. No inline script and no meta refresh: every page that
// loads it keeps a Refresh link that does the same without JavaScript.
(function () {
  "use strict";
  var POLL_MS = 3000;

  function until(options) {
    if (!window.fetch) return;
    var started = Date.now();
    var headers = { Accept: options.json ? "application/json" : "text/html" };

    function ask() {
      if (Date.now() - started > options.giveUpMs) return;
      fetch(options.url, { credentials: "same-origin", headers: headers })
        .then(function (response) {
          if (!response.ok) throw new Error("status " + response.status);
          return options.json ? response.json() : response.text();
        })
        .then(function (answer) {
          if (options.ready(answer)) {
            options.done(answer);
          } else {
            window.setTimeout(ask, POLL_MS);
          }
        })
        .catch(function () {
          window.setTimeout(ask, POLL_MS * 3);
        });
    }

    window.setTimeout(ask, POLL_MS);
  }

  function whenLoaded(start) {
    if (document.readyState === "loading") {
      document.addEventListener("DOMContentLoaded", start);
    } else {
      start();
    }
  }

  window.analysisPoll = { until: until, whenLoaded: whenLoaded };
})();
