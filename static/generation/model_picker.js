// The model field follows the provider chosen in the same form: when the provider changes, ask the server for
// that provider's own list of models and offer it as suggestions (a name can still be typed). Without this
// script the list shown is the one of the provider saved with the form.
(function () {
  "use strict";
  function refresh(input, select) {
    var list = document.getElementById(input.getAttribute("list"));
    var note = document.getElementById(list.id + "-note");
    if (!select.value) {
      list.replaceChildren();
      note.textContent = "Choose a provider to see its models, or type the model's name.";
      return;
    }
    note.textContent = "Asking the provider for its models…";
    fetch(input.dataset.modelsUrl.replace("{}", encodeURIComponent(select.value)), {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    })
      .then(function (reply) {
        if (!reply.ok) throw new Error("HTTP " + reply.status);
        return reply.json();
      })
      .then(function (data) {
        list.replaceChildren.apply(
          list,
          data.models.map(function (name) {
            var option = document.createElement("option");
            option.value = name;
            return option;
          })
        );
        note.textContent = data.models.length
          ? data.models.length + " models listed by the provider: pick one, or type a name."
          : data.problem;
      })
      .catch(function () {
        note.textContent = "Could not ask the server for the provider's models: type the model's name.";
      });
  }
  function start() {
    document.querySelectorAll("input[data-model-picker][data-provider-field]").forEach(function (input) {
      var select = input.form && input.form.elements[input.dataset.providerField];
      if (!select) return;
      select.addEventListener("change", function () {
        refresh(input, select);
      });
    });
  }
  // The admin puts form media in the page's head, before the form exists.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
