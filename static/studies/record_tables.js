/* Read-only inline tables (a participant's answers) scroll sideways on a phone inside their box; with nothing
   focusable inside, a keyboard could not scroll them. Each such box takes the focus itself and is named by its
   heading (WCAG 2.1.1; axe's scrollable-region-focusable). */
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  document.querySelectorAll(".inline-group").forEach(function (group) {
    if (group.querySelector("a[href], button, input:not([type=hidden]), select, textarea")) {
      return;
    }
    var heading = group.querySelector("h2");
    group.tabIndex = 0;
    group.setAttribute("role", "region");
    if (heading) {
      group.setAttribute("aria-label", heading.textContent.trim());
    }
  });
});
