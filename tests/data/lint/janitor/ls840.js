/* purpose-built book for lorescan lint: ls840 */
var APPLY_LIMIT = 2;
var dynamicLore = [
  { priority: 5, personality: 'Always one.' },
  { keywords: ['harbor'], priority: 3, scenario: 'The harbor.' },
  { priority: 4, personality: 'Always two.' },
];
