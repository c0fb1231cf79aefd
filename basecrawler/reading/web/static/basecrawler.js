// basecrawler web view: fold Datasette's column descriptions into a closed <details> so the
// table is the first thing on the page; head each column with the label its record type
// declares (the description's part before " — "), the column name and description as tooltip.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("table.rows-and-columns th[data-column-description]").forEach(function (th) {
    var column = th.getAttribute("data-column");
    var description = th.getAttribute("data-column-description");
    var label = description.split(" — ")[0];
    th.title = column + ": " + description;
    var target = th.querySelector("a") || th;
    target.childNodes.forEach(function (node) {
      if (node.nodeType === Node.TEXT_NODE && node.nodeValue.indexOf(column) !== -1) {
        node.nodeValue = node.nodeValue.replace(column, label);
      }
    });
  });
  var list = document.querySelector("dl.column-descriptions");
  if (!list) return;
  var details = document.createElement("details");
  details.className = "bc-column-help";
  var summary = document.createElement("summary");
  summary.textContent = "Column descriptions";
  details.appendChild(summary);
  list.parentNode.insertBefore(details, list);
  details.appendChild(list);
});
