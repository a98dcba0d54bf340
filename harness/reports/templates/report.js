(function () {
  var box = document.getElementById('test-filter');
  var states = Array.prototype.slice.call(document.querySelectorAll('.state-filter'));
  var rows = Array.prototype.slice.call(document.querySelectorAll('#test-grid tbody tr'));
  var shown = document.getElementById('test-shown');
  if (!box || !shown) { return; }
  function apply() {
    var q = box.value.toLowerCase();
    var wanted = states.filter(function (s) { return s.checked; }).map(function (s) { return s.value; });
    var count = 0;
    rows.forEach(function (r) {
      var show = r.dataset.test.toLowerCase().indexOf(q) >= 0;
      if (show && wanted.length) {
        var have = r.dataset.states.split(' ');
        show = wanted.some(function (w) { return have.indexOf(w) >= 0; });
      }
      r.hidden = !show;
      if (show) { count += 1; }
    });
    shown.textContent = count + ' of ' + rows.length + ' tests shown';
  }
  box.addEventListener('input', apply);
  states.forEach(function (s) { s.addEventListener('change', apply); });
})();
