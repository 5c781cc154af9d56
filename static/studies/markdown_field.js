// The consent field's "Put this template in the box" (studies/admin_markdown.py): fills the text box with the
// template shown above the button, asking first when the box already has text. Without JavaScript the button
// stays hidden and the template can be copied by hand.
// The admin puts form media in the page's head: wait for the page before looking for the button.
document.addEventListener("DOMContentLoaded", function () {
  "use strict";
  document.querySelectorAll("[data-markdown-fill]").forEach(function (button) {
    var box = document.getElementById(button.dataset.markdownFill);
    var template = document.getElementById(button.dataset.markdownFill + "-template");
    if (!box || !template) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      if (box.value.trim() && !window.confirm("Replace the text in the box with the template?")) return;
      box.value = template.textContent;
      box.focus();
    });
  });
});
