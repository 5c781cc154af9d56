// The analysts' dashboard and judge report: while a newer analysis is being computed on the workers, ask the
// server every few seconds whether it is in (static/analysis/poll.js), then say so in the status line (a polite
// live region) and offer the refresh link. The page works without JavaScript (the Refresh link is always there).
(function () {
  "use strict";

  window.analysisPoll.whenLoaded(function () {
    var status = document.getElementById("analysis-status");
    if (!status || status.getAttribute("data-computing") !== "true") return;
    var text = status.querySelector(".status-text");
    var link = status.querySelector(".status-refresh");

    window.analysisPoll.until({
      url: status.getAttribute("data-status-url"),
      json: true,
      giveUpMs: 15 * 60 * 1000,
      ready: function (state) {
        return state.current;
      },
      done: function (state) {
        text.textContent = "New results are ready (computed at " + new Date(state.computed_at).toLocaleString() + ").";
        link.textContent = "Show the new results";
        status.classList.remove("status-computing");
        status.classList.add("status-ready");
      },
    });
  });
})();
