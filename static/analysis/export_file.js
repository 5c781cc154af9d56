// An export file's page: while the file is being prepared on a worker, fetch the page every few seconds and, once
// it is ready, put the new status (a polite live region) and the download link in place. No inline script and no
// meta refresh: without JavaScript the page's Refresh link does the same.
(function () {
  "use strict";
  var POLL_MS = 3000;
  var GIVE_UP_MS = 60 * 60 * 1000;

  function start() {
    var status = document.getElementById("export-status");
    var file = document.getElementById("export-file");
    if (!status || !file || status.getAttribute("data-pending") !== "true" || !window.fetch || !window.DOMParser) {
      return;
    }
    var started = Date.now();

    function poll() {
      if (Date.now() - started > GIVE_UP_MS) return;
      fetch(window.location.href, { credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) throw new Error("status " + response.status);
          return response.text();
        })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html");
          var freshStatus = fresh.getElementById("export-status");
          var freshFile = fresh.getElementById("export-file");
          if (!freshStatus || !freshFile || freshStatus.getAttribute("data-pending") === "true") {
            window.setTimeout(poll, POLL_MS);
            return;
          }
          status.className = freshStatus.className;
          status.setAttribute("data-pending", "false");
          status.innerHTML = freshStatus.innerHTML;
          file.innerHTML = freshFile.innerHTML;
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
