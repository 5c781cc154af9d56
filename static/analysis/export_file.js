// An export file's page: while the file is being prepared on a worker, fetch the page every few seconds
// (static/analysis/poll.js) and, once it is ready, put the new status (a polite live region) and the download
// link in place. Without JavaScript the page's Refresh link does the same.
(function () {
  "use strict";

  window.analysisPoll.whenLoaded(function () {
    var status = document.getElementById("export-status");
    var file = document.getElementById("export-file");
    if (!status || !file || status.getAttribute("data-pending") !== "true" || !window.DOMParser) return;

    var fresh = null;

    window.analysisPoll.until({
      url: window.location.href,
      json: false,
      giveUpMs: 60 * 60 * 1000,
      ready: function (html) {
        var page = new DOMParser().parseFromString(html, "text/html");
        fresh = { status: page.getElementById("export-status"), file: page.getElementById("export-file") };
        return fresh.status && fresh.file && fresh.status.getAttribute("data-pending") !== "true";
      },
      done: function () {
        status.className = fresh.status.className;
        status.setAttribute("data-pending", "false");
        status.innerHTML = fresh.status.innerHTML;
        file.innerHTML = fresh.file.innerHTML;
      },
    });
  });
})();
