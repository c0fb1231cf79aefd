// basecrawler web view: fold Datasette's column descriptions into a closed <details> so the
// table is the first thing on the page, and keep each description as a tooltip on its header.
document.addEventListener("DOMContentLoaded", function () {
  var list = document.querySelector("dl.column-descriptions");
  if (!list) return;
  var terms = list.querySelectorAll("dt");
  terms.forEach(function (dt) {
    var dd = dt.nextElementSibling;
    var th = document.querySelector('th[data-column="' + dt.textContent.trim() + '"]');
    if (th && dd) th.title = dd.textContent.trim();
  });
  var details = document.createElement("details");
  details.className = "bc-column-help";
  var summary = document.createElement("summary");
  summary.textContent = "Column descriptions";
  details.appendChild(summary);
  list.parentNode.insertBefore(details, list);
  details.appendChild(list);
});
