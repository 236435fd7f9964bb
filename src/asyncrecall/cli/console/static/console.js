// The memory list's filters apply as soon as one changes (the form works without this).
document.addEventListener("DOMContentLoaded", () => {
  const form = document.getElementById("filters");
  if (!form) return;
  for (const select of form.querySelectorAll("select")) {
    select.addEventListener("change", () => form.requestSubmit());
  }
});
