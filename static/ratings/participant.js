/* Progressive enhancement of the participant pages; everything works without it.
   - Keyboard shortcuts on the item page: 1, 2, 3, ... press the matching scale button.
   - A form is sent once: a double click or a held key does not send a second answer
     (the server ignores a second answer anyway; this only spares the request). */
(function () {
  "use strict";
  var form = document.querySelector("[data-answer-form]");
  document.querySelectorAll("form").forEach(function (f) {
    f.addEventListener("submit", function (event) {
      if (f.dataset.sent) { event.preventDefault(); return; }
      f.dataset.sent = "1";
    });
  });
  if (!form) { return; }
  var buttons = form.querySelectorAll("[data-shortcut]");
  form.querySelectorAll(".shortcut-key, .shortcut-hint").forEach(function (el) { el.hidden = false; });
  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) { return; }
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) { return; }
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].dataset.shortcut === event.key) {
        event.preventDefault();
        buttons[i].focus();
        if (form.requestSubmit) { form.requestSubmit(buttons[i]); } else { buttons[i].click(); }
        return;
      }
    }
  });
})();
